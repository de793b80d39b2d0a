#!/usr/bin/env bash
# Installs what druto's tests and notebooks need on Debian 12 (CI and the
# docker image run this same script):
#   - OpenBLAS, loaded at run time by pkg/blas for fast CPU matmuls;
#   - Bengali fonts for plotting (Noto Sans Bengali, Lohit Bengali) and rsvg;
#   - Debian's PyTorch (CPU) for the checkpoint cross-check (pkg/train);
#   - Jupyter (Debian's nbconvert/nbclient) and the GoNB kernel, for the
#     notebook tests (notebooks/), pinned as ../shared/NOTEBOOKS.md found works.
# Idempotent; needs root (or sudo) for apt. Set DRUTO_SKIP_APT=1 to skip apt.
set -euo pipefail

APT_PACKAGES=(
  libopenblas0-pthread
  fonts-noto-core fonts-lohit-beng-bengali librsvg2-bin
  jupyter-nbconvert python3-nbclient jupyter-client python3-ipykernel
  python3-torch python3-numpy
)
if [ "${DRUTO_SKIP_APT:-0}" != 1 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# GoNB and its helpers. The module proxy refuses gonb's version list, so
# `go install ...@v0.11.3` fails; a throwaway tools module pins it instead.
GOBIN="$(go env GOPATH)/bin"
export PATH="$GOBIN:$PATH"
if ! command -v gonb >/dev/null || ! command -v goimports >/dev/null || ! command -v gopls >/dev/null; then
  TOOLS="$(mktemp -d)"
  (
    cd "$TOOLS"
    go mod init tools >/dev/null 2>&1
    go get github.com/janpfeifer/gonb@v0.11.3
    go install github.com/janpfeifer/gonb
    go install golang.org/x/tools/cmd/goimports@v0.52.0
    go install golang.org/x/tools/gopls@v0.23.0
  )
  rm -rf "$TOOLS"
fi
# Register the kernel for /usr/bin/python3's Jupyter (--raw_error: readable
# compile errors in outputs).
if ! /usr/bin/python3 -m jupyter kernelspec list 2>/dev/null | grep -q '^ *gonb '; then
  gonb --install --raw_error >/dev/null
fi
echo "druto test dependencies installed: ${APT_PACKAGES[*]}, gonb $(command -v gonb)"
