//go:build !cgo

package blas

// openNative always fails in a build without cgo.
func openNative(name string) (backend, error) { return nil, errNoCgo }
