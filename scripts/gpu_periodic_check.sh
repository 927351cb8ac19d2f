#!/usr/bin/env bash
# The periodic box on the GPU (issue 28), run on the GPU host from the
# repository root after scripts/stage_gpu.sh staged .gpu/ here; logs under
# $OUT. The tests first (the GPU's periodic FMM against the Ewald sum and
# the CPU, f32 and f64, a tolerance; the free-space GPU FMM and the
# conformance matrix's GPU rows, whose lists and P2P kernel changed with
# it), then f32 at 10^7, resident: the periodic FMM beside the free-space
# FMM on the same points, Coulomb and velocity + stretching, at --tol 1e-4
# (the first evaluation searches and estimates, the repeats reuse the
# settings it found and estimate again), the treecode, and the FMM at the
# settings the tolerances chose.
# Usage: scripts/gpu_periodic_check.sh [tests|timings|all]
set -uo pipefail
source "$(dirname "$0")/gpu_unpack.sh"
what=${1:-all}
OUT=${OUT:-/tmp/gpu_periodic}
mkdir -p "$OUT"
export FMM_CACHE_DIR=/tmp/fmm-cache
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
B=.gpu
run() { local name=$1; shift; echo "== $name"; timeout "${LIMIT:-240}" "$@" >"$OUT/$name.log" 2>&1; echo "rc $?" >>"$OUT/$name.log"; }
show() { grep -E "$2" "$OUT/$1.log" | head -${3:-20}; }

if [ "$what" = tests ] || [ "$what" = all ]; then
  run gpu_periodic $B/suite --ignored --test-threads=1 --nocapture gpu_periodic::
  show gpu_periodic "^test |panicked|result|GPU|rc " 40
  run gpu_fmm $B/suite --ignored --test-threads=1 gpu_fmm:: conformance::gpu_
  show gpu_fmm "panicked|result|rc " 20
  run gpu_tree $B/suite --ignored --test-threads=1 --nocapture gpu_tree:: short_range::gpu_
  show gpu_tree "GPU f64 truncated|panicked|result|rc " 20
fi
[ "$what" = tests ] && exit 0

pick="time per|first|tolerance |relative L2|traversal|M2L  |P2P  |error estimate|rc "
for k in coulomb velocity-stretching; do
  for per in "" "--periodic 1"; do
    tag="${k}_$([ -n "$per" ] && echo periodic || echo free)"
    run "tol_$tag" $B/fmm_bench --backend cuda --precision f32 --kernel "$k" --n 10000000 \
      --strengths random --resident --repeat 5 --tol 1e-4 $per
    echo "-- $tag, --tol 1e-4"; show "tol_$tag" "$pick" 12
  done
done
# The treecode (monopole, theta 0.5) in both domains.
for per in "" "--periodic 1"; do
  tag="tree_$([ -n "$per" ] && echo periodic || echo free)"
  run "$tag" $B/tree_bench --backend cuda --precision f32 --kernel coulomb --dist uniform \
    --strengths random --n 10000000 --theta 0.5 --repeat 3 $per
  echo "-- $tag"; show "$tag" "time per|trees|walk|work|relative L2|rc " 12
done
# The settings each tolerance chose above, explicit, both domains.
for ks in "coulomb 8 0.56" "coulomb 12 0.7" "velocity-stretching 12 0.56"; do
  set -- $ks
  for per in "" "--periodic 1"; do
    tag="explicit_$1_p$2_$([ -n "$per" ] && echo periodic || echo free)"
    run "$tag" $B/fmm_bench --backend cuda --precision f32 --kernel "$1" --n 10000000 \
      --strengths random --resident --repeat 5 --p "$2" --theta "$3" $per
    echo "-- $tag"; show "$tag" "$pick" 12
  done
done
