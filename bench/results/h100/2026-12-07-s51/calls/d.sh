# session 51 call D: whichever card comes. On an H200: calls/a.sh (the
# decode self-test, issue 38's fp8 and issue 34's sample must-shows, with
# the binaries of build/c54); on an H100: calls/c.sh (the attention
# changes against 6e3a234, and Nsight Compute on attention_decode at B64).
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $card"
case "$card" in
  *H200*) bash bench/results/h100/2026-12-07-s51/calls/a.sh ;;
  *) bash bench/results/h100/2026-12-07-s51/calls/c.sh ;;
esac
