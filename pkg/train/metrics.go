package train

import (
	"fmt"

	"github.com/druto/druto/internal/boundedread"
	"github.com/druto/druto/pkg/record"
)

// ReadMetricsFile reads a metrics.jsonl log written by Run. A value written
// as null (not finite when logged) reads back as NaN.
func ReadMetricsFile(path string) ([]Metric, error) {
	b, err := readMetrics(path)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	out, err := record.ParseMetricLines(b)
	if err != nil {
		return nil, fmt.Errorf("train: %s %w", path, err)
	}
	return out, nil
}

// maxMetricsBytes bounds the metrics log read back (on resume, too).
const maxMetricsBytes = 4 << 30

// readMetrics reads a metrics log: a regular file, its size checked first.
func readMetrics(path string) ([]byte, error) { return boundedread.ReadFile(path, maxMetricsBytes) }
