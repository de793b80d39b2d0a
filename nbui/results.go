package nbui

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/druto/druto"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/record"
)

// Results are the JSON files committed under a checkout's bench/results,
// by kind; other files there (logs) are not listed.
type Results struct {
	Bench   []string // training-step benchmark reports (record.Report with step times)
	Kernels []string // kernel micro-benchmark reports (records carrying only "kernels")
	Detect  []string // detect reports (druto.Report: "backend" and "host")
}

// FindResults lists repo/bench/results/*.json by kind, sorted by name.
// A file that is not valid JSON is an error; JSON of another kind is left
// out.
func FindResults(repo string) (Results, error) {
	var res Results
	files, err := filepath.Glob(filepath.Join(repo, "bench", "results", "*.json"))
	if err != nil {
		return res, fmt.Errorf("nbui: %w", err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return res, fmt.Errorf("nbui: %w", err)
		}
		kind, err := record.Classify(b)
		if err != nil {
			return res, fmt.Errorf("nbui: %s: %w", f, err)
		}
		switch kind {
		case record.KindKernels:
			res.Kernels = append(res.Kernels, f)
		case record.KindBench:
			res.Bench = append(res.Bench, f)
		case record.KindDetect:
			res.Detect = append(res.Detect, f)
		}
	}
	return res, nil
}

// ReadReport reads a detect report saved as JSON (druto detect --json).
func ReadReport(path string) (druto.Report, error) {
	var r druto.Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("nbui: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("nbui: %s: %w", path, err)
	}
	return r, nil
}

// DeviceName names a report's first GPU, or says there is none.
func DeviceName(lang string, r druto.Report) string {
	if len(r.Devices) == 0 {
		return Sprintf(lang, "no GPU")
	}
	return r.Devices[0].Name
}

// DetectSummaryTable sums up detect reports saved as JSON, one row each:
// the file, the GPU, the driver, the backend chosen, how the kernels were
// obtained, how many passed their self-test and the largest relative error.
func DetectSummaryTable(lang string, paths ...string) (*Table, error) {
	t := NewTable(lang, "file", "GPU", "CUDA driver", "backend", "kernels", "self-tests passed", "max rel. error").
		WithCaption("Detect reports committed in bench/results")
	for _, p := range paths {
		r, err := ReadReport(p)
		if err != nil {
			return nil, err
		}
		drv := "-"
		if r.Driver != nil {
			drv = "CUDA " + r.Driver.CUDA
		}
		from := map[gpu.From]int{}
		var order []gpu.From
		passed, tested, worst := 0, 0, 0.0
		for _, k := range r.Kernels {
			if from[k.Status] == 0 {
				order = append(order, k.Status)
			}
			from[k.Status]++
			if k.SelfTest != nil {
				tested++
				if k.SelfTest.Pass {
					passed++
				}
				worst = max(worst, k.SelfTest.MaxRelErr)
			}
		}
		var ks []string
		for _, f := range order {
			ks = append(ks, fmt.Sprintf("%d %s", from[f], f))
		}
		t.Add(filepath.Base(p), DeviceName(lang, r), drv, r.Backend, strings.Join(ks, ", "),
			fmt.Sprintf("%d/%d", passed, tested), fmt.Sprintf("%.1e", worst))
	}
	return t, nil
}
