package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
)

// Module is loaded device code (CUmodule): a cubin, or PTX the driver
// compiled for the device when it was loaded.
type Module struct {
	c *Context
	h uintptr
	// JITLog is the driver's info log when PTX was compiled (empty for a cubin).
	JITLog string
	// LoadTime is the wall time of the load, JIT compilation included.
	LoadTime time.Duration
	// FromPTX reports whether the image was PTX.
	FromPTX bool
}

// IsCubin reports whether image is an ELF object (a cubin) rather than PTX.
func IsCubin(image []byte) bool { return bytes.HasPrefix(image, []byte("\x7fELF")) }

// LoadModule loads a cubin or PTX text. PTX is JIT compiled for this
// device by the driver; a failure returns the JIT's error log in the error.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: LoadModule of an empty image")
	}
	m := &Module{c: c, FromPTX: !IsCubin(image)}
	if m.FromPTX && image[len(image)-1] != 0 {
		image = append(append([]byte(nil), image...), 0) // PTX is a C string
	}
	start := time.Now()
	err := c.Do(func() error {
		var errLog string
		var err error
		m.h, m.JITLog, errLog, err = c.api.moduleLoad(image)
		if err != nil && strings.TrimSpace(errLog) != "" {
			return fmt.Errorf("%w\n%s", err, strings.TrimSpace(errLog))
		}
		return err
	})
	m.LoadTime = time.Since(start)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Unload unloads the module; its functions become invalid.
func (m *Module) Unload() error {
	return m.c.Do(func() error { return m.c.api.moduleUnload(m.h) })
}

// Function returns the kernel called name (an extern "C" name).
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{c: m.c, Name: name}
	err := m.c.Do(func() error {
		var err error
		f.h, err = m.c.api.moduleGetFunction(m.h, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: kernel %q: %w", name, err)
	}
	return f, nil
}

// Function is a kernel in a loaded module (CUfunction).
type Function struct {
	c    *Context
	h    uintptr
	Name string
}

// FuncAttributes are a kernel's resources, as the compiler left them.
type FuncAttributes struct {
	Registers     int `json:"registers"`             // per thread
	SharedStatic  int `json:"shared_static_bytes"`   // static shared memory per block
	Const         int `json:"const_bytes"`           // user constant memory
	Local         int `json:"local_bytes"`           // local memory per thread: spills and stack
	MaxThreads    int `json:"max_threads_per_block"` // the most threads a block may have
	PTXVersion    int `json:"ptx_version"`           // 10·major + minor of the PTX it came from
	BinaryVersion int `json:"binary_version"`        // 10·major + minor of the SASS
}

// Function attribute numbers (CUfunction_attribute).
const (
	funcMaxThreads     = 0
	funcSharedSize     = 1
	funcConstSize      = 2
	funcLocalSize      = 3
	funcNumRegs        = 4
	funcPTXVersion     = 5
	funcBinaryVersion  = 6
	funcMaxDynamicSmem = 8
	funcCarveout       = 9 // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
)

// Attributes returns the kernel's resource usage.
func (f *Function) Attributes() (FuncAttributes, error) {
	var a FuncAttributes
	err := f.c.Do(func() error {
		for _, q := range []struct {
			attr int
			dst  *int
		}{
			{funcNumRegs, &a.Registers}, {funcSharedSize, &a.SharedStatic}, {funcConstSize, &a.Const},
			{funcLocalSize, &a.Local}, {funcMaxThreads, &a.MaxThreads}, {funcPTXVersion, &a.PTXVersion},
			{funcBinaryVersion, &a.BinaryVersion},
		} {
			v, err := f.c.api.funcGetAttribute(q.attr, f.h)
			if err != nil {
				return err
			}
			*q.dst = v
		}
		return nil
	})
	return a, err
}

// SetSharedCarveout sets the share of the SM's L1/shared storage (0-100%)
// the driver prefers for the kernel's shared memory: a persistent kernel
// whose blocks must all be resident asks for the most.
func (f *Function) SetSharedCarveout(percent int) error {
	return f.c.Do(func() error { return f.c.api.funcSetAttribute(f.h, funcCarveout, percent) })
}

// SetMaxDynamicShared raises the kernel's dynamic shared memory limit, needed
// for more than 48 KiB per block.
func (f *Function) SetMaxDynamicShared(bytes int) error {
	return f.c.Do(func() error { return f.c.api.funcSetAttribute(f.h, funcMaxDynamicSmem, bytes) })
}

// Dim3 is a grid or block extent.
type Dim3 struct{ X, Y, Z uint32 }

// D1 returns the one-dimensional extent (n, 1, 1).
func D1(n int) Dim3 { return Dim3{uint32(n), 1, 1} }

// MaxArgBytes is the most argument bytes a launch takes (the classic
// 4 KiB kernel parameter limit).
const MaxArgBytes = 4096

// Launch queues the kernel on s with grid × block threads, shmem bytes of
// dynamic shared memory and the given arguments, which must match the
// kernel's parameters in order and C type:
//
//	DevicePtr          pointer (8 bytes)
//	int, int32         int (4 bytes; an int out of int32's range is an error)
//	uint32             unsigned int
//	int64, uint64      long long, unsigned long long
//	float32, float64   float, double
//
// The arguments are copied into C memory for the call; the kernel sees
// their values at launch, so they may change right after. Any other type
// is an error, and so is a zero extent.
func (f *Function) Launch(s *Stream, grid, block Dim3, shmem int, args ...any) error {
	return f.launch(s, grid, block, shmem, false, args)
}

// LaunchPDL is Launch as a programmatic dependent launch (sm_90 and newer,
// CUDA 12): the kernel may start while the kernel before it on s is still
// draining, so it must begin with griddepcontrol.wait (which returns once
// that kernel has completed and its writes are visible) before it touches
// memory the earlier kernel writes. Context.PDL reports whether the
// driver can; where it cannot, LaunchPDL returns CUDA_ERROR_NOT_SUPPORTED.
func (f *Function) LaunchPDL(s *Stream, grid, block Dim3, shmem int, args ...any) error {
	return f.launch(s, grid, block, shmem, true, args)
}

func (f *Function) launch(s *Stream, grid, block Dim3, shmem int, pdl bool, args []any) error {
	packed, offs, err := packArgs(args)
	if err != nil {
		return fmt.Errorf("cuda: launch %s: %w", f.Name, err)
	}
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return fmt.Errorf("cuda: launch %s: empty grid %v or block %v", f.Name, grid, block)
	}
	if shmem < 0 {
		return fmt.Errorf("cuda: launch %s: negative shared memory %d", f.Name, shmem)
	}
	err = f.c.Do(func() error {
		return f.c.api.launchKernel(f.h, grid, block, uint32(shmem), s.h, packed, offs, pdl)
	})
	if err != nil {
		return fmt.Errorf("cuda: launch %s grid %v block %v: %w", f.Name, grid, block, err)
	}
	return nil
}

// packArgs lays out kernel arguments as the C ABI does for the parameter
// buffer: each value at an offset aligned to its size.
func packArgs(args []any) ([]byte, []int32, error) {
	var buf []byte
	offs := make([]int32, 0, len(args))
	put := func(size int, write func(b []byte)) {
		for len(buf)%size != 0 {
			buf = append(buf, 0)
		}
		offs = append(offs, int32(len(buf)))
		b := make([]byte, size)
		write(b)
		buf = append(buf, b...)
	}
	le := binary.LittleEndian
	for i, a := range args {
		switch v := a.(type) {
		case DevicePtr:
			put(8, func(b []byte) { le.PutUint64(b, uint64(v)) })
		case int:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, nil, fmt.Errorf("argument %d: int %d does not fit a C int", i, v)
			}
			put(4, func(b []byte) { le.PutUint32(b, uint32(int32(v))) })
		case int32:
			put(4, func(b []byte) { le.PutUint32(b, uint32(v)) })
		case uint32:
			put(4, func(b []byte) { le.PutUint32(b, v) })
		case int64:
			put(8, func(b []byte) { le.PutUint64(b, uint64(v)) })
		case uint64:
			put(8, func(b []byte) { le.PutUint64(b, v) })
		case float32:
			put(4, func(b []byte) { le.PutUint32(b, math.Float32bits(v)) })
		case float64:
			put(8, func(b []byte) { le.PutUint64(b, math.Float64bits(v)) })
		default:
			return nil, nil, fmt.Errorf("argument %d: unsupported type %T (want DevicePtr, int, int32, uint32, int64, uint64, float32 or float64)", i, a)
		}
		if len(buf) > MaxArgBytes {
			return nil, nil, fmt.Errorf("arguments exceed %d bytes", MaxArgBytes)
		}
	}
	return buf, offs, nil
}
