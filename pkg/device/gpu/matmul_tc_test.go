package gpu

import (
	"fmt"
	"testing"
)

// TestTCPlan (any machine): matmul_rows_tc's plan for GPT-2's decode
// shapes on 132 SMs fits its shared memory and its limits, fills the GPU,
// and is a function of the sizes and the SM count only; logged for the
// benchmarks' record.
func TestTCPlan(t *testing.T) {
	for _, sms := range []int{40, 108, 132} {
		for _, N := range []int{9, 16, 32, 33, 64} {
			for _, s := range tcShapes {
				C, OC := s[0], s[1]
				p := tcPlan(N, C, OC, sms)
				tiles, chunks := p.grid(C, OC)
				if sms == 132 && (N == 16 || N == 64) {
					t.Logf("N %2d C %4d OC %4d: ct %2d kc %4d: %3d tiles × %2d chunks = %4d blocks, %5d B smem, %.2f µs (model)", N, C, OC, p.ct(), p.kc(), tiles, chunks, tiles*chunks, p.smem(N), float64(tcCost(p, N, C, OC, sms))/1e6)
				}
				if p.span == 0 || p.span > tcSpanMax || p.span%32 != 0 || p.lmt < 0 || p.lmt > 2 || p.smem(N) > tcSmemMax {
					t.Errorf("sms %d N %d C %d OC %d: plan %+v", sms, N, C, OC, p)
				}
				if p != tcPlan(N, C, OC, sms) {
					t.Errorf("sms %d N %d C %d OC %d: two plans", sms, N, C, OC)
				}
			}
		}
	}
}

// tcShapes are (C, OC) of GPT-2's linear layers at widths 768, 1024, 1280
// and 1600: qkv, attn_proj, fc, fc_proj.
var tcShapes = func() [][2]int {
	var out [][2]int
	for _, c := range []int{768, 1024, 1280, 1600} {
		out = append(out, [2]int{c, 3 * c}, [2]int{c, c}, [2]int{c, 4 * c}, [2]int{4 * c, c})
	}
	return out
}()

var _ = fmt.Sprint
