package train

import (
	"encoding/json"
	"fmt"
	"os"
)

// ReadMetricsFile reads a metrics.jsonl log written by Run.
func ReadMetricsFile(path string) ([]Metric, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	var out []Metric
	for i, line := range splitLines(b) {
		var m Metric
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("train: %s line %d: %w", path, i+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}
