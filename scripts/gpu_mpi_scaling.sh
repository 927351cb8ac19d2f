#!/usr/bin/env bash
# MPI on the GPUs of one host, one process a GPU: the GPU tests of the
# local essential tree and of sets joined on the device, weak scaling at
# 2^24 particles a GPU (gravity and velocity + stretching at 1e-4; in a box
# grown with the processes, and in the unit cube at the most GPUs), the
# decaying turbulence at 256^3 on every GPU, strong scaling of 10^8
# (docs/BENCHMARKS.md, 2026-11-28 third entry). Stage the binaries in
# .gpu/bin first (fmm_bench and vortex_turbulence_mpi built with
# `--features mpi`, the suite's test binary; `strip` them: the three fit
# the 64 MiB a call carries); logs under $OUT.
# Each process's last evaluation by stage is in the logs ("process q:").
# Usage: scripts/gpu_mpi_scaling.sh [weak|rest|all|bench]   (each part under
# 10 minutes; bench: the weak part without the GPU tests)
set -u
OUT=${OUT:-/tmp/fmm-out}
mkdir -p "$OUT"
export FMM_CACHE_DIR=/tmp/fmm-cache NCCL_NVLS_ENABLE=0 RAYON_NUM_THREADS=16
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=.gpu/bin
what=${1:-all}
G=$(nvidia-smi -L | wc -l); echo "GPUs: $G"
PS="1 2"; [ "$G" -ge 4 ] && PS="1 2 4"
run() { # name P extra...
  local name=$1 P=$2; shift 2
  FMM_TRACE=1 timeout 120 mpirun --bind-to none -n "$P" $B/fmm_bench --distributed \
    --method tolerance --tol 1e-4 --n 16777216 --backend cuda --repeat 3 --samples 50 "$@" \
    >"$OUT/$name-$P.log" 2>&1
  echo "== $name $P rc $?"; grep -E "^in parts|median" "$OUT/$name-$P.log" | cut -c1-200
  grep -E "tolerance 1e-4: (laplace|tree)" "$OUT/$name-$P.log" | tail -"$P" | cut -c1-150
}
if [ "$what" = weak ] || [ "$what" = all ]; then
  timeout 250 $B/suite --ignored --test-threads 1 gpu_essential:: gpu_scale::sets_joined \
    gpu_scale::resident_particles gpu_scale::sources_in_two_lots wall::a_wall_on_the_device \
    gpu_fmm::the_tolerance_is_met_on_the_gpu \
    gpu_fmm::f32_targets_apart gpu_vortex::the_gpus_remeshing_spread >"$OUT/gpu-tests.log" 2>&1
  echo "== gpu tests rc $?"; grep -E "test result|FAILED|panicked" "$OUT/gpu-tests.log"
fi
if [ "$what" != rest ]; then
  for P in $PS; do run weak-gravity "$P" --kernel gravity; done
  for P in $PS; do run weak-vs "$P" --kernel velocity-stretching; done
  run fixed-gravity "$G" --kernel gravity --fixed-box
  # Every source joined after the exchange, against the default (the own
  # sources evaluated during it, the others' after: docs/MPI.md,
  # 2026-11-29 entries).
  run joined-gravity "$G" --kernel gravity --overlap never
  run fixed-vs "$G" --kernel velocity-stretching --fixed-box
fi
if [ "$what" = rest ] || [ "$what" = all ]; then
  timeout 200 mpirun --bind-to none -n "$G" $B/vortex_turbulence_mpi --n 256 --steps 3 \
    --backend cuda >"$OUT/turb-$G.log" 2>&1
  echo "== turbulence $G rc $?"; tail -5 "$OUT/turb-$G.log"
  # Remeshed and projected at every step (docs/MPI.md, seventh entry).
  timeout 200 mpirun --bind-to none -n "$G" $B/vortex_turbulence_mpi --n 256 --steps 3 \
    --remesh-every 1 --backend cuda >"$OUT/turb-remesh-$G.log" 2>&1
  echo "== turbulence remeshed $G rc $?"; grep -v "^\[fmm" "$OUT/turb-remesh-$G.log" | tail -7
  for P in $PS; do
    FMM_TRACE=1 timeout 110 mpirun --bind-to none -n "$P" $B/fmm_bench --distributed --strong \
      --method tolerance --tol 1e-4 --n 100000000 --backend cuda --repeat 2 --samples 50 \
      >"$OUT/strong-$P.log" 2>&1
    echo "== strong $P rc $?"; grep -E "^first|^in parts|median" "$OUT/strong-$P.log" | cut -c1-200
  done
fi
