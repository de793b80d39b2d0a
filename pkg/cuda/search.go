package cuda

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"
)

// Library is one opened shared library.
type Library interface {
	// Sym returns the address of a function; the error wraps ErrSymbol.
	Sym(name string) (unsafe.Pointer, error)
	// Path returns the file the loader opened (resolved for a bare soname).
	Path() string
	// Close releases the library.
	Close() error
}

// Loader opens shared libraries. The default is dlopen (RTLD_LAZY |
// RTLD_LOCAL); tests pass fakes. Open takes an absolute path or a bare
// soname, and its error wraps fs.ErrNotExist when there is no such file, so
// that the search can tell an absent library from one that failed to load.
type Loader interface {
	Open(name string) (Library, error)
}

// LoadOptions say where to look for the libraries. The zero value searches
// as the package comment describes.
type LoadOptions struct {
	LibDir     string // first place searched; empty means $DRUTO_CUDA_LIB_DIR
	OnlyLibDir bool   // search LibDir (or $DRUTO_CUDA_LIB_DIR) alone
	NoNVRTC    bool   // hide NVRTC, as DRUTO_NO_NVRTC=1 does
	Loader     Loader // nil means dlopen
}

// Environment variables read by the loaders.
const (
	EnvLibDir  = "DRUTO_CUDA_LIB_DIR" // directory searched first
	EnvNoNVRTC = "DRUTO_NO_NVRTC"     // "1" hides NVRTC (JIT the embedded PTX instead)
)

func (o LoadOptions) libDir() string {
	if o.LibDir != "" {
		return o.LibDir
	}
	return os.Getenv(EnvLibDir)
}

// NVRTCHidden reports whether options or environment hide NVRTC.
func (o LoadOptions) NVRTCHidden() bool {
	if o.NoNVRTC {
		return true
	}
	v := os.Getenv(EnvNoNVRTC)
	return v != "" && v != "0" && v != "false"
}

func (o LoadOptions) loader() Loader {
	if o.Loader != nil {
		return o.Loader
	}
	return systemLoader
}

// libSpec names one library and its sonames, newest first.
type libSpec struct {
	name    string // short name in reports: "cuda", "nvrtc", "cublas", "cublasLt", "nvml"
	sonames []string
	missing error // the sentinel an absent library wraps
}

var (
	specDriver = libSpec{"cuda", []string{"libcuda.so.1"}, ErrNoDriver}
	specNVRTC  = libSpec{"nvrtc", []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}, ErrLibraryNotFound}
	specBLAS   = libSpec{"cublas", []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}, ErrLibraryNotFound}
	specLt     = libSpec{"cublasLt", []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"}, ErrLibraryNotFound}
	specNVML   = libSpec{"nvml", []string{"libnvidia-ml.so.1"}, ErrLibraryNotFound}
)

// WellKnownDirs returns the directories searched after the loader path.
func WellKnownDirs() []string {
	target, multiarch := "x86_64-linux", "x86_64-linux-gnu"
	if runtime.GOARCH == "arm64" {
		target, multiarch = "sbsa-linux", "aarch64-linux-gnu"
	}
	return []string{
		"/usr/local/cuda/targets/" + target + "/lib",
		"/usr/local/cuda/lib64",
		"/usr/local/nvidia/lib64",
		"/usr/lib/" + multiarch,
	}
}

// candidates lists, in search order, every name the loader is asked for.
func candidates(spec libSpec, o LoadOptions) []string {
	var out []string
	if dir := o.libDir(); dir != "" {
		for _, s := range spec.sonames {
			out = append(out, filepath.Join(dir, s))
		}
		if o.OnlyLibDir {
			return out
		}
	}
	out = append(out, spec.sonames...)
	for _, dir := range WellKnownDirs() {
		for _, s := range spec.sonames {
			out = append(out, filepath.Join(dir, s))
		}
	}
	return out
}

// LibInfo describes one library as the loader found it.
type LibInfo struct {
	Name    string   `json:"name"`              // cuda, nvrtc, cublas, cublasLt or nvml
	Found   bool     `json:"found"`             // loaded and usable
	Soname  string   `json:"soname,omitempty"`  // the soname that matched
	Path    string   `json:"path,omitempty"`    // the file loaded
	Version string   `json:"version,omitempty"` // e.g. "13.0"
	Error   string   `json:"error,omitempty"`   // why it is not usable
	Tried   []string `json:"tried,omitempty"`   // failed candidates before it, with the reason
}

// find opens the first candidate that loads. Absent files are noted in
// Tried as "absent"; files that exist but fail to load keep the loader's
// message, and the final error names them.
func find(spec libSpec, o LoadOptions) (Library, LibInfo, error) {
	info := LibInfo{Name: spec.name}
	ld := o.loader()
	if ld == nil {
		info.Error = ErrNoGPUSupport.Error()
		return nil, info, ErrNoGPUSupport
	}
	var broken []string
	for _, name := range candidates(spec, o) {
		lib, err := ld.Open(name)
		if err == nil {
			info.Found = true
			info.Soname = filepath.Base(name)
			info.Path = lib.Path()
			if info.Path == "" {
				info.Path = name
			}
			return lib, info, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			info.Tried = append(info.Tried, name+": absent")
			continue
		}
		msg := name + ": " + err.Error()
		info.Tried = append(info.Tried, msg)
		broken = append(broken, msg)
	}
	var err error
	if len(broken) > 0 {
		err = fmt.Errorf("%w: %s did not load: %s", spec.missing, spec.name, strings.Join(broken, "; "))
	} else {
		where := "the loader path and " + strings.Join(WellKnownDirs(), ", ")
		if dir := o.libDir(); dir != "" {
			where = dir + ", " + where
			if o.OnlyLibDir {
				where = dir
			}
		}
		err = fmt.Errorf("%w: %s not found (looked for %s in %s; set %s to its directory)",
			spec.missing, spec.name, strings.Join(spec.sonames, ", "), where, EnvLibDir)
	}
	info.Error = err.Error()
	return nil, info, err
}

// symbols resolves the functions of one library, collecting every missing
// name so that one error lists them all.
type symbols struct {
	lib     Library
	missing []string
}

// need returns a required function's address (nil when missing, recorded).
func (s *symbols) need(name string) unsafe.Pointer {
	p, err := s.lib.Sym(name)
	if err != nil || p == nil {
		s.missing = append(s.missing, name)
		return nil
	}
	return p
}

// want returns an optional function's address, or nil.
func (s *symbols) want(name string) unsafe.Pointer {
	p, err := s.lib.Sym(name)
	if err != nil {
		return nil
	}
	return p
}

// err reports the missing required functions, if any.
func (s *symbols) err() error {
	if len(s.missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s lacks %s (too old a version, or not the real library)",
		ErrSymbol, s.lib.Path(), strings.Join(s.missing, ", "))
}
