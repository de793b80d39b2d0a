package cpu

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/druto/druto/pkg/tensor"
)

func init() {
	if v, err := strconv.Atoi(os.Getenv("ATTN_BLOCK")); err == nil {
		attnBlock = v
	}
}

func cpuTimeNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(0, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkZAttnCPU(b *testing.B) {
	defer func(p bool) { poisonScratch = p }(poisonScratch)
	poisonScratch = false
	const B, NH, T, hs = 8, 4, 128, 32
	const C = NH * hs
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		b.Run(dt.String(), func(b *testing.B) {
			r := ntRNG(1)
			d := ntDev(true, 0)
			qkv, _ := ntTensor(b, dt, ntNormal(r, B*T*3*C, 1, 0), B, T, 3*C)
			dout, _ := ntTensor(b, dt, ntNormal(r, B*T*C, 1, 0), B, T, C)
			out, att, dqkv := tensor.New(dt, B, T, C), tensor.New(dt, B, NH, T, T), tensor.New(dt, B, T, 3*C)
			c0 := cpuTimeNow()
			for b.Loop() {
				d.Attention(out, att, qkv, B, T, C, NH)
				d.AttentionBackward(dqkv, dout, qkv, nil, att, B, T, C, NH)
			}
			b.ReportMetric(float64(cpuTimeNow()-c0)/1e6/float64(b.N), "cpu-ms")
		})
	}
}
