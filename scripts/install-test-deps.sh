#!/usr/bin/env bash
# Installs what druto's tests and notebooks need on Debian 12 (CI and the
# docker image run this same script):
#   - OpenBLAS, loaded at run time by pkg/blas for fast CPU matmuls;
#   - Bengali fonts for plotting (Noto Sans Bengali, Lohit Bengali) and rsvg;
#   - Debian's PyTorch (CPU) for the checkpoint cross-check (pkg/train);
#   - Jupyter (Debian's nbconvert/nbclient) and the GoNB kernel, for the
#     notebook tests (notebooks/), pinned as ../shared/NOTEBOOKS.md found works;
#   - Chromium and the Jupyter Notebook server, for the browser tests
#     (notebooks/web_test.go: exported HTML and live Jupyter);
#   - a C compiler for cgo (pkg/cuda, pkg/blas), already on most machines,
#     and g++ for the kernel emulator that pkg/device/gpu's
#     TestFP8EmulatorMatchesCPU builds (kernels/emu/fp8).
# Idempotent; needs root (or sudo) for apt. Set DRUTO_SKIP_APT=1 to skip apt and
# DRUTO_CUDA_LIBS=1 to add NVRTC and cuBLAS 11.8 from Debian's non-free
# component (docker/ sets it; the driver, libcuda, comes from the host), or
# DRUTO_CUDA_LIBS=nvrtc for NVRTC alone (CI compiles every kernel
# with it and needs no cuBLAS without a GPU).
# DRUTO_SKIP_BROWSER=1 leaves out Chromium (~110 MB to download, ~350 MB
# installed), which only the browser tests use: an image that serves the
# notebooks does not need it.
# DRUTO_NOTEBOOK_SERVER=1, which used to add the Jupyter Notebook server, is
# still accepted and changes nothing: the browser tests need the server, so
# it is always installed.
set -euo pipefail

APT_PACKAGES=(
  libopenblas0-pthread
  fonts-noto-core fonts-lohit-beng-bengali librsvg2-bin
  jupyter-nbconvert python3-nbclient jupyter-client python3-ipykernel
  jupyter-notebook
  python3-torch python3-numpy
  gcc g++ libc6-dev binutils ca-certificates git
)
if [ "${DRUTO_SKIP_BROWSER:-0}" != 1 ]; then
  APT_PACKAGES+=(chromium)
fi
case "${DRUTO_CUDA_LIBS:-0}" in
  1) APT_PACKAGES+=(libnvrtc11.2 libnvrtc-builtins11.8 libcublas11 libcublaslt11) ;;
  nvrtc) APT_PACKAGES+=(libnvrtc11.2 libnvrtc-builtins11.8) ;;
  0) ;;
  *) echo "DRUTO_CUDA_LIBS=${DRUTO_CUDA_LIBS}: want 0, 1 or nvrtc" >&2; exit 2 ;;
esac
if [ "${DRUTO_SKIP_APT:-0}" != 1 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    # The CUDA libraries are in non-free: add that component to Debian's own
    # source (as ../shared/GPU.md does for nvcc) unless a source has it.
    if [ "${DRUTO_CUDA_LIBS:-0}" != 0 ] && ! grep -rqs 'non-free' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      sed -e 's/^Components: main$/Components: contrib non-free/' /etc/apt/sources.list.d/debian.sources |
        $SUDO tee /etc/apt/sources.list.d/non-free.sources >/dev/null
    fi
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
# (grep without -q reads all its input: with pipefail, -q's early exit would
# make the pipeline fail on SIGPIPE and reinstall every time.)
if ! /usr/bin/python3 -m jupyter kernelspec list 2>/dev/null | grep '^ *gonb ' >/dev/null; then
  gonb --install --raw_error >/dev/null
fi
echo "druto test dependencies installed: ${APT_PACKAGES[*]}, gonb $(command -v gonb)"
