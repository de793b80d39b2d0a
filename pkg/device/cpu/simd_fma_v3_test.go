//go:build amd64.v3

package cpu

// goContractsFMA is true for GOAMD64=v3 and later builds, where the Go
// compiler may fuse x*y + z into one FMA in the reference loops.
const goContractsFMA = true
