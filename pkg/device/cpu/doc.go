// Package cpu is the pure-Go reference implementation of device.Device,
// multi-core, with the fused and the decomposed form of each op side by side.
package cpu
