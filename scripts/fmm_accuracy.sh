#!/usr/bin/env bash
# The FMM's accuracy table (like yokota2009 Fig. 10): relative L2 error of
# all outputs against the f64 direct sum on 256 sampled targets, for
# p = 4 to 16, theta 0.5, ncrit 64, on a uniform cube and a Plummer sphere,
# in f32 and f64. Gravity and Coulomb without softening (N = 50000),
# Biot-Savart and stretching with core radii 0.02 to 0.04 (N = 20000: about
# the mean spacing, overlap 1 as in yokota2009). Prints a markdown table.
#
# Usage: fmm_accuracy.sh [cpu|cuda] [BINARY]: the backend (default cpu),
# and an fmm_bench binary already built (on the GPU host: .gpu/fmm_bench
# from scripts/stage_gpu.sh); without one it is built here.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-cpu}
bin=${2:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --example fmm_bench
  bin=./target/release/examples/fmm_bench
fi
orders="4 6 8 10 12 14 16"
printf "| kernel | distribution | precision |"; for p in $orders; do printf " p = %s |" $p; done; echo
printf "| --- | --- | --- |"; for p in $orders; do printf " --- |"; done; echo
for spec in "gravity 50000 --params 0" "coulomb 50000" "biot-savart 20000" "stretching 20000"; do
  set -- $spec
  kernel=$1; n=$2; shift 2
  for dist in uniform plummer; do
    for prec in f32 f64; do
      printf "| %s | %s | %s |" "$kernel" "$dist" "$prec"
      for p in $orders; do
        e=$("$bin" --backend "$backend" --kernel "$kernel" --n "$n" --dist "$dist" --precision "$prec" \
          --p "$p" --repeat 1 --samples 256 "$@" | sed -n 's/^relative L2 error *\([^ ]*\) .*/\1/p')
        printf " %s |" "$e"
      done
      echo
    done
  done
done
