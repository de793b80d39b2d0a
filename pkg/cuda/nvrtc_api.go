package cuda

import (
	"fmt"
	"strings"
)

// NVRTC is the loaded run-time compiler, libnvrtc. It needs no context and
// is safe for use from any goroutine.
type NVRTC struct {
	api          nvrtcAPI
	info         LibInfo
	Major, Minor int
}

// LoadNVRTC finds and loads libnvrtc. With NVRTC hidden (LoadOptions.NoNVRTC
// or DRUTO_NO_NVRTC=1) it returns an error wrapping ErrLibraryNotFound.
func LoadNVRTC(o LoadOptions) (*NVRTC, error) {
	n, _, err := loadNVRTC(o)
	return n, err
}

func loadNVRTC(o LoadOptions) (*NVRTC, LibInfo, error) {
	if o.NVRTCHidden() {
		return nil, LibInfo{Name: specNVRTC.name}, fmt.Errorf("%w: nvrtc hidden by %s=1", ErrLibraryNotFound, EnvNoNVRTC)
	}
	lib, info, err := find(specNVRTC, o)
	if err != nil {
		return nil, info, err
	}
	api, err := newNVRTCAPI(lib)
	if err != nil {
		return nil, info, err
	}
	n := &NVRTC{api: api, info: info}
	if n.Major, n.Minor, err = api.version(); err != nil {
		return nil, info, err
	}
	n.info.Version = n.Version()
	return n, n.info, nil
}

// Version returns "major.minor", e.g. "13.0".
func (n *NVRTC) Version() string { return fmt.Sprintf("%d.%d", n.Major, n.Minor) }

// Info describes where NVRTC was found and its version.
func (n *NVRTC) Info() LibInfo { return n.info }

// SupportedArchs returns the real architectures NVRTC can compile for, as
// numbers (75 for sm_75).
func (n *NVRTC) SupportedArchs() ([]int, error) { return n.api.supportedArchs() }

// CompileError is a compilation that failed, with NVRTC's log.
type CompileError struct {
	Name string // the program's name, e.g. "layernorm.cu"
	Arch string
	Log  string
	Err  error // the Error of nvrtcCompileProgram
}

// Error gives the failure and the compiler's log.
func (e *CompileError) Error() string {
	return fmt.Sprintf("cuda: nvrtc compile of %s for %s failed: %v\n%s", e.Name, e.Arch, e.Err, strings.TrimSpace(e.Log))
}

// Unwrap returns the underlying Error.
func (e *CompileError) Unwrap() error { return e.Err }

// Compile compiles CUDA C source for arch: a real architecture ("sm_90")
// gives a cubin, a virtual one ("compute_75") gives PTX. options are passed
// on (e.g. "-DDTYPE=2"). It returns the code and the compiler's log (often
// empty); a failed compilation returns a *CompileError holding the log.
func (n *NVRTC) Compile(src, name, arch string, options ...string) ([]byte, string, error) {
	var cubin bool
	switch {
	case strings.HasPrefix(arch, "sm_"):
		cubin = true
	case strings.HasPrefix(arch, "compute_"):
	default:
		return nil, "", fmt.Errorf("cuda: nvrtc: architecture %q is neither sm_XY nor compute_XY", arch)
	}
	opts := append([]string{"--gpu-architecture=" + arch}, options...)
	code, log, err := n.api.compile(src, name, opts, cubin)
	if err != nil {
		return nil, log, &CompileError{Name: name, Arch: arch, Log: log, Err: err}
	}
	return code, log, nil
}
