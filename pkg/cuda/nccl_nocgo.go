//go:build !cgo || !linux

package cuda

// nccl_nocgo.go: the build without cgo (or off Linux) has no NCCL; LoadNCCL
// reports ErrNoGPUSupport, as every other loader does.

func newNCCLAPI(Library) (ncclAPI, error) { return nil, ErrNoGPUSupport }
