#!/usr/bin/env bash
# The test command the README gives: vet, then every test (GPU tests skip
# with a message on machines without a GPU; see scripts/gpu-build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -count=1 -timeout 60m ./...
