#!/usr/bin/env bash
# FMM3D's Stokes FMM (fmm3dpy.stfmm3d, singular Stokeslet, velocity at the
# sources) on seeded uniform points we save as .npy, with its error against
# an f64 numpy direct sum. Arguments go to scripts/peers/fmm3d_stokes.py
# (--n, --eps, --samples, --repeat, --seed, --wait-idle, --outdir).
#   bash scripts/peers/fmm3d_stokes.sh [--omp] --n 100000,1000000 --eps 1e-4,1e-6
# Needs numpy and fmm3dpy (installed here when missing):
#   python3 -m pip install numpy fmm3dpy
# Runs with OMP_NUM_THREADS=2 (override by setting it). The PyPI wheel of
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
py=python3
if [ "${1:-}" = "--omp" ]; then
  shift
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
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
"$py" scripts/peers/fmm3d_stokes.py "$@"
