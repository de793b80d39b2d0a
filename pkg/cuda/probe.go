package cuda

// Libraries is every library druto loads, as Load found them.
type Libraries struct {
	Driver *Driver // nil when the driver did not load; then nothing is usable
	NVRTC  *NVRTC  // nil: kernels come from the embedded PTX
	BLASLt *BLASLt
	BLAS   *BLAS
	NVML   *NVML
	// Info has one entry per library, in the order above, found or not.
	Info []LibInfo
	// Err is the driver's load error.
	Err error
}

// Load loads every library it can and records, for each, where it was found
// and its version or why it is unusable. A missing optional library (NVRTC,
// cuBLAS, cuBLASLt, NVML) is recorded in Info, not returned.
func Load(o LoadOptions) *Libraries {
	l := &Libraries{}
	record := func(info LibInfo, err error) {
		if err != nil {
			info.Found = false
			info.Error = err.Error()
		}
		l.Info = append(l.Info, info)
	}
	var info LibInfo
	var err error
	l.Driver, info, err = loadDriver(o)
	l.Err = err
	record(info, err)
	l.NVRTC, info, err = loadNVRTC(o)
	record(info, err)
	l.BLASLt, info, err = loadBLASLt(o) // before cuBLAS, which needs it
	record(info, err)
	l.BLAS, info, err = loadBLAS(o)
	record(info, err)
	l.NVML, info, err = loadNVML(o)
	record(info, err)
	return l
}
