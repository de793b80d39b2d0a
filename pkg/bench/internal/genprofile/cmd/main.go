// Command cmd writes pkg/bench/profile_ops.go (package genprofile); run it
// from pkg/bench with go generate.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/druto/druto/pkg/bench/internal/genprofile"
)

func main() {
	src, err := genprofile.Generate(filepath.Join("..", "device", "device.go"), ".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(genprofile.Output, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
