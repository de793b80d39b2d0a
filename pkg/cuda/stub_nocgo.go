//go:build !cgo || !linux

package cuda

// stub_nocgo.go: the build without cgo (or off Linux). No library can be
// loaded; every loader returns ErrNoGPUSupport, "no GPU support in this
// build", and the rest of the package compiles unchanged around it.

// systemLoader is nil: find reports ErrNoGPUSupport.
var systemLoader Loader

func newDriverAPI(Library) (driverAPI, error) { return nil, ErrNoGPUSupport }
func newNVRTCAPI(Library) (nvrtcAPI, error)   { return nil, ErrNoGPUSupport }
func newBLASAPI(Library) (blasAPI, error)     { return nil, ErrNoGPUSupport }
func newLtAPI(Library) (ltAPI, error)         { return nil, ErrNoGPUSupport }
func newNVMLAPI(Library) (nvmlAPI, error)     { return nil, ErrNoGPUSupport }

// osThreadID is unused without cgo; it returns -1.
func osThreadID() int { return -1 }
