#!/usr/bin/env bash
# FMM3D's Stokes FMM (fmm3dpy.stfmm3d, singular Stokeslet, velocity at the
# sources) and ours (fmm_bench, kernel stokeslet-singular, f64, ki far
# field) on the same seeded uniform points we save as .npy, with both
# errors against one f64 numpy direct sum and the ratio of the times at
# matched accuracy. Arguments go to scripts/peers/fmm3d_stokes.py (--n,
# --eps, --samples, --repeat, --seed, --wait-idle, --outdir, --ours-cases,
# --ours-repeat, --ours-ncrit, --threads):
#   bash scripts/peers/fmm3d_stokes.sh [--omp] [--no-ours | --ours BIN] --n 100000,1000000 --eps 1e-3,1e-4
# Our side: without --ours BIN, our fmm_bench is built here
# (cargo build --release -p fmm-examples --example fmm_bench) and
# target/release/examples/fmm_bench runs; --no-ours runs FMM3D only.
# Needs numpy and fmm3dpy (installed here when missing):
#   python3 -m pip install numpy fmm3dpy
# Runs with OMP_NUM_THREADS=2 (override by setting it; our threads follow
# it unless --threads). The PyPI wheel of
# fmm3dpy (2.1.0) is built WITHOUT OpenMP (no libgomp; its meson build
# passes no -fopenmp), so it runs on one core whatever OMP_NUM_THREADS says.
# --omp uses instead a venv $PEERS_BUILD/fmm3d-omp (PEERS_BUILD default
# /work/peers-build) with fmm3dpy built here from PyPI's source
# distribution with OpenMP (needs gfortran: apt-get install -y gfortran;
# about 5 minutes on 2 cores):
#   python3 -m venv $PEERS_BUILD/fmm3d-omp
#   $PEERS_BUILD/fmm3d-omp/bin/python -m pip install numpy
#   $PEERS_BUILD/fmm3d-omp/bin/python -m pip install --no-binary fmm3dpy fmm3dpy \
#     -Csetup-args=-Dfortran_args=-fopenmp -Csetup-args=-Dc_link_args=-fopenmp \
#     -Csetup-args=-Dfortran_link_args=-fopenmp
# The script prints cpu/wall for each call (the cores it really used).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=python3; omp=0; ours=build; args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --omp) omp=1 ;;
    --no-ours) ours=none ;;
    --ours) ours="$2"; shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [ $omp -eq 1 ]; then
  venv="${PEERS_BUILD:-/work/peers-build}/fmm3d-omp"
  if ! "$venv/bin/python" -c "import numpy, fmm3dpy" 2>/dev/null; then
    dpkg -s gfortran >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gfortran >/dev/null; }
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q numpy
    "$venv/bin/python" -m pip install -q --no-binary fmm3dpy fmm3dpy \
      -Csetup-args=-Dfortran_args=-fopenmp -Csetup-args=-Dc_link_args=-fopenmp \
      -Csetup-args=-Dfortran_link_args=-fopenmp
  fi
  py="$venv/bin/python"
else
  python3 -c "import numpy, fmm3dpy" 2>/dev/null || python3 -m pip install -q numpy fmm3dpy
fi
case "$ours" in
  none) ;;
  build)
    cargo build --release -q -p fmm-examples --example fmm_bench
    args+=(--ours "$PWD/target/release/examples/fmm_bench") ;;
  *) args+=(--ours "$ours") ;;
esac
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
echo "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
"$py" scripts/peers/fmm3d_stokes.py ${args[@]+"${args[@]}"}
