package dist

import (
	"sort"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// checkPlan verifies the plan against its layout: coverage without gap or
// overlap (Check), sizes within the cap, reverse order, boundaries on tensor
// boundaries except inside tensors larger than the cap, and greediness (a
// bucket that ends on a tensor boundary could not have taken the next
// tensor below it whole).
func checkPlan(t *testing.T, l *tensor.Layout, p Plan, capElems int) {
	t.Helper()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	if p.Total != l.Total || p.Cap != capElems {
		t.Fatalf("plan total %d cap %d, want %d and %d", p.Total, p.Cap, l.Total, capElems)
	}
	sum := 0
	for _, b := range p.Buckets {
		sum += b.Len
	}
	if sum != l.Total {
		t.Fatalf("buckets hold %d elements, the buffer %d", sum, l.Total)
	}
	starts := map[int]int{} // segment start -> size
	for _, s := range l.Segments {
		starts[s.Offset] = s.Numel()
	}
	starts[l.Total] = 0
	inside := func(off int) (tensor.Segment, bool) { // the segment off cuts, if any
		i := sort.Search(len(l.Segments), func(i int) bool { return l.Segments[i].Offset >= off })
		if i > 0 && off < l.Segments[i-1].Offset+l.Segments[i-1].Numel() {
			return l.Segments[i-1], off > l.Segments[i-1].Offset
		}
		return tensor.Segment{}, false
	}
	ending := map[int]tensor.Segment{} // end offset -> segment
	for _, s := range l.Segments {
		ending[s.Offset+s.Numel()] = s
	}
	for i, b := range p.Buckets {
		if i > 0 && b.Offset >= p.Buckets[i-1].Offset {
			t.Fatalf("bucket %d at %d does not come below bucket %d at %d (reverse layout order)", i, b.Offset, i-1, p.Buckets[i-1].Offset)
		}
		for _, edge := range []int{b.Offset, b.End()} {
			if s, cut := inside(edge); cut && s.Numel() <= capElems {
				t.Fatalf("bucket %d [%d,%d) cuts %s (%d elements), which fits in a bucket", i, b.Offset, b.End(), s.Name, s.Numel())
			}
		}
		if _, onBoundary := starts[b.Offset]; onBoundary && b.Offset > 0 {
			// The tensor ending at b.Offset went to the next bucket: it must not have fit.
			if s, ok := ending[b.Offset]; ok && b.Len+s.Numel() <= capElems {
				t.Fatalf("bucket %d [%d,%d) has room for %s (%d elements) but left it", i, b.Offset, b.End(), s.Name, s.Numel())
			}
		}
	}
}

func TestPlanSmallLayout(t *testing.T) {
	var l tensor.Layout
	l.Add("a", true, 10)   // [0,10)
	l.Add("b", false, 3)   // [10,13)
	l.Add("big", true, 25) // [13,38): larger than the cap of 8
	l.Add("c", false, 5)   // [38,43)
	l.Add("d", false, 2)   // [43,45)
	p, err := NewPlan(&l, 8*4)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, &l, p, 8)
	// d+c = 7 fits; big is cut from its end into 8, 8, 8 and its rest of 1
	// starts the next bucket with b (1+3 = 4); a (10) is cut into 8 and 2.
	want := []Bucket{{38, 7}, {30, 8}, {22, 8}, {14, 8}, {10, 4}, {2, 8}, {0, 2}}
	if len(p.Buckets) != len(want) {
		t.Fatalf("buckets %v, want %v", p.Buckets, want)
	}
	for i := range want {
		if p.Buckets[i] != want[i] {
			t.Fatalf("buckets %v, want %v", p.Buckets, want)
		}
	}
}

func TestPlanGPT(t *testing.T) {
	for _, name := range []string{"tiny", "gpt2-124M"} {
		cfg, err := gpt.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		l := cfg.Layout()
		for _, bytes := range []int{DefaultBucketBytes, 1 << 20, 4096} {
			p, err := NewPlan(l, bytes)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, l, p, bytes/4)
			if bytes == DefaultBucketBytes && name == "gpt2-124M" {
				// 124M float32 is ~475 MiB: at least 19 full buckets.
				if n := len(p.Buckets); n < l.Total*4/DefaultBucketBytes || n > l.Total*4/DefaultBucketBytes+len(l.Segments) {
					t.Fatalf("gpt2-124M: %d buckets of 25 MiB for %d bytes", n, l.Total*4)
				}
				t.Logf("gpt2-124M: %d elements in %d buckets of at most %d", l.Total, len(p.Buckets), p.Cap)
			}
		}
	}
}

func TestPlanErrors(t *testing.T) {
	if _, err := FlatPlan(10, 3); err == nil || !strings.Contains(err.Error(), "holds no float32") {
		t.Fatalf("3-byte buckets: %v", err)
	}
	l := tensor.Layout{Segments: []tensor.Segment{{Name: "x", Offset: 4, Shape: tensor.Shape{2}}}, Total: 6}
	if _, err := NewPlan(&l, 64); err == nil || !strings.Contains(err.Error(), "contiguous") {
		t.Fatalf("gap in layout: %v", err)
	}
	p, err := FlatPlan(0, 0)
	if err != nil || len(p.Buckets) != 0 || p.Cap != DefaultBucketBytes/4 {
		t.Fatalf("empty plan %+v %v", p, err)
	}
	bad := Plan{Buckets: []Bucket{{5, 5}, {0, 6}}, Total: 10, Cap: 8}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "end at 5") {
		t.Fatalf("overlap not caught: %v", err)
	}
	bad = Plan{Buckets: []Bucket{{2, 8}}, Total: 10, Cap: 8}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "stop at element 2") {
		t.Fatalf("gap not caught: %v", err)
	}
}
