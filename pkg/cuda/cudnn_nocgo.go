//go:build !cgo || !linux

package cuda

// cudnn_nocgo.go: the build without cgo (or off Linux) has no cuDNN;
// LoadDNN reports ErrNoGPUSupport, as every other loader does.

func newDNNAPI(Library) (dnnAPI, error) { return nil, ErrNoGPUSupport }
