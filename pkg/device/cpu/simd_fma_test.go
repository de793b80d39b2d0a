//go:build !amd64.v3

package cpu

// goContractsFMA is false for GOAMD64 v1 and v2 builds: the compiler emits
// no FMA, so the pure-Go loops round every product and sum as the kernels do.
const goContractsFMA = false
