// Package notebooks holds druto's GoNB notebooks, in English (en/) and
// Bangla (bn/), and the test that executes them with real Jupyter.
//
// The notebooks are 01-build, 02-detect, 03-train, 04-benchmark and 05-gpt2. Their
// code cells are identical in both languages; only the markdown differs.
// The package has no Go code of its own: its test (go test ./notebooks)
// checks the pairing of the two languages always, and executes all ten
// notebooks when jupyter and gonb are on PATH (see README.md).
package notebooks
