#!/usr/bin/env bash
# One GPU run for the node far fields (issue 14): their GPU tests (against
# the CPU and the f64 direct sum), then the timings the issue asks for, side
# by side with the Laplace FMM in the same run. Run on the GPU host from the
# repository root after scripts/stage_gpu.sh staged .gpu/ here; logs under
# $OUT. Usage: scripts/gpu_far_check.sh
# [tests|timings|compressed|treecode|tables|coverage|coverage-timings|all]
# (compressed: the compressed M2L's GPU test and its timings only;
# treecode: the walk with node far fields, its tests and timings only;
# tables: the node far fields' errors and times over a grid of settings;
# coverage: gpu_fmm and the conformance GPU rows; coverage-timings: the
# compressed M2L with a core radius, the default far field's switch).
set -u
source "$(dirname "$0")/gpu_unpack.sh"
OUT=${OUT:-/tmp/fmm-out}
mkdir -p "$OUT"
export FMM_CACHE_DIR=/tmp/fmm-cache
what=${1:-all}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
run() { # name, then the command
  local name=$1; shift
  echo "-- $name: $*" | tee -a "$OUT/timings.log"
  timeout 90 "$@" >>"$OUT/timings.log" 2>&1 || echo "   FAILED ($?)" | tee -a "$OUT/timings.log"
  tail -n 40 "$OUT/timings.log" | grep -E "^time per|^first|^relative|^tolerance|^  M2L|^  P2P|^  Upward|^work|^compressed|cannot|error:" | tail -8
}
N=10000000
if [ "$what" = treecode ]; then
  echo "== the treecode's walk, monopoles and node far fields"
  timeout 200 .gpu/suite --ignored --test-threads=1 --nocapture gpu::the_gpu_walk >"$OUT/gpu_walk.log" 2>&1
  grep -E "^test |panicked|result|FAILED|against" "$OUT/gpu_walk.log"
  timeout 240 .gpu/suite --ignored --test-threads=1 --nocapture conformance::gpu_treecode conformance::gpu_degenerate >"$OUT/conformance_tree.log" 2>&1
  grep -E "^test |panicked|result|FAILED" "$OUT/conformance_tree.log"
  # Node far fields against monopoles, the kernels without a Laplace far
  # field (Plummer sphere, coherent strengths, f32).
  for n in 1000000 $N; do
    run tree-yukawa-ki-p3-n$n .gpu/tree_bench --backend cuda --kernel yukawa --n $n --far-field ki --order 3 --theta 0.5 --repeat 3
    run tree-yukawa-ki-p4-n$n .gpu/tree_bench --backend cuda --kernel yukawa --n $n --far-field ki --order 4 --theta 0.6 --repeat 3
    run tree-stokeslet-ki-p3-n$n .gpu/tree_bench --backend cuda --kernel stokeslet --n $n --far-field ki --order 3 --theta 0.5 --repeat 3
    run tree-gravity-monopole-n$n .gpu/tree_bench --backend cuda --kernel gravity --n $n --far-field monopole --theta 0.5 --repeat 3
    run tree-gravity-ppm-p4-n$n .gpu/tree_bench --backend cuda --kernel gravity --n $n --far-field ppm --order 4 --theta 0.6 --repeat 3
  done
  exit 0
fi
if [ "$what" = tables ]; then
  # The node far fields' settings on the GPU (for a GPU tolerance table):
  # gravity without softening, 10^6 points in a cube, f64 (the CPU tables'
  # kernel; f64 so that errors below f32's reach are seen), every (p,
  # theta) of a grid; one line each in tables.log.
  for ff in ki ppm; do
    if [ $ff = ki ]; then orders="2 3 4 5 6"; else orders="3 4 5 6 7 8"; fi
    for p in $orders; do
      for t in 0.6 0.7 0.8; do
        echo "-- $ff p $p theta $t" >>"$OUT/tables.log"
        timeout 60 .gpu/fmm_bench --backend cuda --precision f64 --params 0 --n 1000000 --far-field $ff --p $p --theta $t --repeat 3 --samples 256 2>&1 \
          | grep -E "^time per|^first|^relative" >>"$OUT/tables.log" || echo "   FAILED" >>"$OUT/tables.log"
      done
    done
  done
  paste -d' ' - - - - <"$OUT/tables.log" | cut -c1-220
  exit 0
fi
if [ "$what" = coverage ]; then
  # The compressed M2L for targets apart and a uniform core radius, the
  # default far field following the tolerance (softened gravity: Laplace
  # stops short, then ki), and every GPU row of the conformance matrix.
  echo "== gpu_fmm and the conformance matrix's GPU rows"
  timeout 280 .gpu/suite --ignored --test-threads=1 --nocapture gpu_fmm:: >"$OUT/gpu_fmm.log" 2>&1
  grep -E "^test |panicked|result|FAILED|against|f32" "$OUT/gpu_fmm.log"
  timeout 300 .gpu/suite --ignored --test-threads=1 --nocapture conformance::gpu_ >"$OUT/conformance.log" 2>&1
  grep -E "^test |panicked|result|FAILED" "$OUT/conformance.log"
  exit 0
fi
if [ "$what" = coverage-timings ]; then
  # A uniform core radius (one spacing): compressed, then by the kernel
  # (what the GPU ran before); softened gravity at a tolerance with the
  # default far field (the switch) and with ki asked for; softened gravity
  # in f64 at 1e-6.
  run biot-savart-ki-p4 .gpu/fmm_bench --backend cuda --kernel biot-savart --n $N --far-field ki --p 4 --theta 0.8 --repeat 3 --samples 256
  run biot-savart-ki-p4-kernel .gpu/fmm_bench --backend cuda --kernel biot-savart --n $N --far-field ki --p 4 --theta 0.8 --repeat 3 --samples 256 --node-m2l kernel
  run softened-auto-tol1e-5 .gpu/fmm_bench --backend cuda --n $N --tol 1e-5 --repeat 3 --samples 256
  run softened-ki-tol1e-5 .gpu/fmm_bench --backend cuda --n $N --far-field ki --tol 1e-5 --repeat 3 --samples 256
  run softened-f64-ki-tol1e-6 .gpu/fmm_bench --backend cuda --precision f64 --n 1000000 --far-field ki --tol 1e-6 --repeat 3 --samples 256
  run softened-f64-auto-tol1e-6 .gpu/fmm_bench --backend cuda --precision f64 --n 1000000 --tol 1e-6 --repeat 3 --samples 256
  # yokota2009's question at equal error, measured rather than
  # interpolated: pseudo-particles p 4 against the expansions at p 8.
  run ppm-p4-t0.6 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field ppm --p 4 --theta 0.6 --repeat 3 --samples 256
  run laplace-p8-t0.6 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field laplace --p 8 --theta 0.6 --repeat 3 --samples 256
  exit 0
fi
if [ "$what" = compressed ]; then
  echo "== the compressed M2L on the GPU"
  timeout 200 .gpu/suite --ignored --test-threads=1 --nocapture gpu_fmm::the_compressed >"$OUT/gpu_fmm_compressed.log" 2>&1
  grep -E "^test |panicked|result|FAILED|against|f32" "$OUT/gpu_fmm_compressed.log"
  # Softened gravity (eps half the mean spacing) at 1e-5 (issue: <= 0.3 s):
  # compressed (the default) against the kernel between node sets.
  run softened-ki-p4-t0.8 .gpu/fmm_bench --backend cuda --n $N --far-field ki --p 4 --theta 0.8 --repeat 3 --samples 256
  run softened-ki-p4-t0.8-kernel .gpu/fmm_bench --backend cuda --n $N --far-field ki --p 4 --theta 0.8 --repeat 3 --samples 256 --node-m2l kernel
  run softened-ki-p4-t0.8-rank1e-5 .gpu/fmm_bench --backend cuda --n $N --far-field ki --p 4 --theta 0.8 --repeat 3 --samples 256 --rank-tol 1e-5
  run softened-ki-p4-t0.7 .gpu/fmm_bench --backend cuda --n $N --far-field ki --p 4 --theta 0.7 --repeat 3 --samples 256
  run softened-ki-p5-t0.8 .gpu/fmm_bench --backend cuda --n $N --far-field ki --p 5 --theta 0.8 --repeat 3 --samples 256
  run stokeslet-ki-p3 .gpu/fmm_bench --backend cuda --kernel stokeslet --n $N --far-field ki --p 3 --theta 0.8 --repeat 3 --samples 256
  run stokeslet-ki-p4 .gpu/fmm_bench --backend cuda --kernel stokeslet --n $N --far-field ki --p 4 --theta 0.8 --repeat 3 --samples 256
  # Homogeneous kernels (one set of operators for every level).
  run ppm-p4 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field ppm --p 4 --theta 0.6 --repeat 3 --samples 256
  run ppm-p7 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field ppm --p 7 --theta 0.6 --repeat 3 --samples 256
  run ki-p5 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field ki --p 5 --theta 0.7 --repeat 3 --samples 256
  run stokeslet-singular-ki-p4 .gpu/fmm_bench --backend cuda --kernel stokeslet-singular --n $N --far-field ki --p 4 --theta 0.8 --repeat 3 --samples 256
  exit 0
fi
if [ "$what" != timings ]; then
  echo "== conformance (node far fields)"
  timeout 240 .gpu/suite --ignored --test-threads=1 --nocapture conformance::gpu_ >"$OUT/conformance.log" 2>&1
  echo "== gpu_fmm"
  timeout 200 .gpu/suite --ignored --test-threads=1 --nocapture gpu_fmm:: >"$OUT/gpu_fmm.log" 2>&1
  grep -E "^test |panicked|result|FAILED" "$OUT/gpu_fmm.log"
  grep -E "^test |panicked|result|FAILED" "$OUT/conformance.log"
fi
[ "$what" = tests ] && exit 0
echo "== timings"
# The regularised Stokeslet at 1e-4 (issue: <= 1.0 s, trees and copies included).
run stokeslet-ki-p3 .gpu/fmm_bench --backend cuda --kernel stokeslet --n $N --far-field ki --p 3 --theta 0.8 --repeat 3 --samples 256
run stokeslet-ki-p4 .gpu/fmm_bench --backend cuda --kernel stokeslet --n $N --far-field ki --p 4 --theta 0.8 --repeat 3 --samples 256
# Softened gravity (eps half the mean spacing) at 1e-5 (issue: <= 0.3 s).
run softened-ki-p4 .gpu/fmm_bench --backend cuda --n $N --far-field ki --p 4 --theta 0.7 --repeat 3 --samples 256
run softened-laplace-p8 .gpu/fmm_bench --backend cuda --n $N --far-field laplace --p 8 --theta 0.6 --repeat 3 --samples 256
# PPM against the Laplace expansions, gravity without softening, near 1e-4 and 1e-6.
run laplace-p6 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field laplace --p 6 --theta 0.7 --repeat 3 --samples 256
run ppm-p4 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field ppm --p 4 --theta 0.6 --repeat 3 --samples 256
run ki-p3 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field ki --p 3 --theta 0.8 --repeat 3 --samples 256
run laplace-p9 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field laplace --p 9 --theta 0.6 --repeat 3 --samples 256
run ppm-p7 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field ppm --p 7 --theta 0.6 --repeat 3 --samples 256
run ki-p5 .gpu/fmm_bench --backend cuda --params 0 --n $N --far-field ki --p 5 --theta 0.7 --repeat 3 --samples 256
