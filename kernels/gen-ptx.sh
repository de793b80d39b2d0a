#!/usr/bin/env bash
# gen-ptx.sh: regenerate kernels/ptx/*.ptx from kernels/*.cu with nvcc 11.8
# (run through `go generate ./kernels`). For each .cu, every dtype its
# "druto:dtypes" line names is built with -DDTYPE=DRUTO_<DTYPE> for
# compute_75 (PTX ISA 7.8, JIT-compiled by any driver >= R520), or for
# compute_NN where the file has a "// druto:arch NN" line, or per dtype
# "// druto:arch bf16:80 f16:75" (flash_attention.cu: bf16 mma needs
# compute_80), and the
# source's sha256, and that of each header it includes (#include "X.cuh",
# e.g. common.cuh), are written into the PTX header, which TestPTXUpToDate
# checks. Files are written to a temp name and renamed.
#
# nvcc 11.8 on Debian 12: see ../../shared/GPU.md (nvidia-cuda-toolkit from
# non-free). Override the compiler with NVCC=/path/to/nvcc.
#
#   ./gen-ptx.sh                 every .cu
#   ./gen-ptx.sh layernorm.cu    only these
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-nvcc}
if ! command -v "$NVCC" >/dev/null; then
  echo "gen-ptx.sh: $NVCC not found; install nvcc 11.8 (see shared/GPU.md) or set NVCC" >&2
  exit 1
fi
ver=$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
if [ "$ver" != "11.8" ]; then
  echo "gen-ptx.sh: warning: nvcc $ver, the committed PTX is made with 11.8 (PTX ISA 7.8)" >&2
fi
mkdir -p ptx
# Arguments name the sources to regenerate (default: every *.cu).
if [ $# -gt 0 ]; then files=("$@"); else files=(*.cu); fi
for cu in "${files[@]}"; do
  base=${cu%.cu}
  hash=$(sha256sum "$cu" | cut -d' ' -f1)
  dtypes=$(sed -n 's|^// druto:dtypes ||p' "$cu")
  if [ -z "$dtypes" ]; then
    echo "gen-ptx.sh: $cu has no '// druto:dtypes' line" >&2
    exit 1
  fi
  archline=$(sed -n 's|^// druto:arch ||p' "$cu")
  for dt in $dtypes; do
    # the dtype's own "dt:NN" wins over a plain "NN"; 75 without either
    minarch=75
    for f in $archline; do case $f in *:*) ;; *) minarch=$f ;; esac; done
    for f in $archline; do case $f in "$dt":*) minarch=${f#*:} ;; esac; done
    ARCH=compute_$minarch
    define=DRUTO_$(echo "$dt" | tr a-z A-Z)
    out=ptx/${base}_${dt}.ptx
    tmp=$(mktemp "ptx/.${base}_${dt}.XXXXXX")
    {
      echo "// druto-source: $cu"
      echo "// druto-source-sha256: $hash"
      echo "// druto-dtype: $dt"
      for h in $(sed -n 's|^#include "\([A-Za-z0-9_]*\.cuh\)"[[:space:]]*$|\1|p' "$cu" | awk '!seen[$0]++'); do
        echo "// druto-header-sha256: $h $(sha256sum "$h" | cut -d' ' -f1)"
      done
      echo "// druto-build: nvcc $ver -ptx -arch=$ARCH -DDTYPE=$define"
      "$NVCC" -ptx -arch=$ARCH -DDTYPE=$define "$cu" -o -
    } > "$tmp"
    mv "$tmp" "$out"
    echo "gen-ptx.sh: $out"
  done
done
