#!/usr/bin/env bash
# The periodic box's measurements of docs/BENCHMARKS.md ("Periodic boxes"),
# on the CPU: (1) the error against the image levels (Coulomb f64,
# 20,000 random neutral charges, p 20, theta 0.4, against the Ewald sum at
# 256 sampled targets); (2) the periodic FMM beside the free-space FMM on
# the same points at a tolerance (the periodic estimate included); (3) the
# Ewald sum at 10^4 beside the periodic FMM on the same points.
# Usage: scripts/periodic_table.sh [levels|times|ewald|all] (from the
# repository root; BIN=target/release/examples by default, built first).
set -uo pipefail
what=${1:-all}
bin=${BIN:-target/release/examples}
[ -n "${BIN:-}" ] || cargo build --release --examples -q
fmm="$bin/fmm_bench --kernel coulomb --precision f64 --strengths random"
pick='time per|relative L2|tolerance |error estimate|work '
if [ "$what" = levels ] || [ "$what" = all ]; then
  echo "== error against the image levels (N 20000, p 20, theta 0.4)"
  for l in 1 2 3 4 5 6; do
    echo "-- levels $l"
    $fmm --n 20000 --p 20 --theta 0.4 --repeat 1 --periodic 1 --image-levels "$l" \
      | grep -E "$pick"
  done
fi
if [ "$what" = times ] || [ "$what" = all ]; then
  for n in 100000 1000000; do
    for per in "" "--periodic 1"; do
      echo "== N $n --tol 1e-4 ${per:-free space}"
      $fmm --n "$n" --tol 1e-4 --repeat 3 --samples 0 $per | grep -E "$pick|M2L  |P2P  "
    done
  done
fi
if [ "$what" = ewald ] || [ "$what" = all ]; then
  echo "== Ewald direct, N 10000"
  $bin/direct_bench --kernel coulomb --precision f64 --n 10000 --repeat 1 --periodic 1 \
    | grep -E "interactions|time|s/eval|per"
  echo "== periodic FMM, N 10000, --tol 1e-8"
  $fmm --n 10000 --tol 1e-8 --repeat 3 --periodic 1 | grep -E "$pick"
fi
