#!/usr/bin/env bash
# exafmm-t (github.com/exafmm/exafmm-t, kernel-independent FMM in C++) on
# points we write as .npy, for a side-by-side with our FMM:
#   bash scripts/peers/exafmm_t.sh /path/to/exafmm-t [--own] [--no-ours] [args of exafmm_t.py]
# e.g. bash scripts/peers/exafmm_t.sh /work/peers-build/exafmm-t --n 1000000
#
# Our side runs in the same script on the same points: our fmm_bench is
# built (cargo build --release) and run for each --ours-cases entry
# (default: Coulomb by Laplace expansions p 9 theta 0.58, Yukawa by the
# kernel-independent far field p 5 theta 0.8, rank tolerance 1e-4; see
# exafmm_t.py), unless --no-ours.
#
# Builds exafmm-t out of tree (its autotools configure: SIMD flags for this
# CPU, OpenMP, OpenBLAS, FFTW; -g -O2 as its default) into
# $EXAFMM_T_BUILD (default $PEERS_BUILD/exafmm-t-build, PEERS_BUILD default
# /work/peers-build), then our driver scripts/peers/exafmm_t_driver.cpp
# against its headers (exafmm-t is header-only) with the same flags, then
# runs scripts/peers/exafmm_t.py (--n, --cases, --k, --targets, --points,
# --samples, --repeat, --threads, --outdir: see there), which prints one line
# per case: kernel, N, p, ncrit, seconds, potential and gradient errors.
# Defaults: N = 10^6, Laplace p 5 ncrit 300 and modified Helmholtz k = 20
# p 5 ncrit 64, N separate targets, 2 threads, OPENBLAS_NUM_THREADS=1.
# --own also runs exafmm-t's own tests (tests/fmm_laplace,
# tests/fmm_modified_helmholtz: their points, their timer "Total", their
# error on 10 sampled leaves) with the same N, p and ncrit.
#
# Needs (installed here when missing, as root, Debian 12):
#   apt-get install -y g++ make gfortran libopenblas-dev libfftw3-dev python3-pip
#   python3 -m pip install numpy
# (gfortran: exafmm-t's configure uses Fortran macros to find BLAS/LAPACK.)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 EXAFMM_T_SRC_DIR [--own] [exafmm_t.py args]" >&2; exit 2; }
src="$(cd "$1" && pwd)"; shift
[ -x "$src/configure" ] || { echo "$src: no configure script (not an exafmm-t source folder?)" >&2; exit 2; }
own=0; ours=1; n=1000000; k=20; threads=2; args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --own) own=1 ;;
    --no-ours) ours=0 ;;
    --n) n="$2"; args+=("$1" "$2"); shift ;;
    --k) k="$2"; args+=("$1" "$2"); shift ;;
    --threads) threads="$2"; args+=("$1" "$2"); shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
peers="${PEERS_BUILD:-/work/peers-build}"
build="${EXAFMM_T_BUILD:-$peers/exafmm-t-build}"

# --- dependencies
missing=()
for pkg in g++ make gfortran libopenblas-dev libfftw3-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
python3 -c "import numpy" 2>/dev/null || python3 -m pip install -q numpy

# --- exafmm-t: configure (out of tree) and its two FMM tests
mkdir -p "$build"
if [ ! -f "$build/Makefile" ] || [ "$build/Makefile" -ot "$src/configure" ]; then
  (cd "$build" && "$src/configure" > configure.log 2>&1) || { tail -20 "$build/configure.log" >&2; exit 1; }
fi
make -C "$build/tests" -j"$(nproc)" fmm_laplace fmm_modified_helmholtz > "$build/make.log" 2>&1 \
  || { tail -20 "$build/make.log" >&2; exit 1; }

# --- our driver, with exafmm-t's configured flags
var() { sed -n "s/^$1 = //p" "$build/tests/Makefile"; }
driver="$build/exafmm_t_driver"
if [ ! -x "$driver" ] || [ "$driver" -ot "$here/exafmm_t_driver.cpp" ] || [ "$driver" -ot "$build/Makefile" ]; then
  # shellcheck disable=SC2046
  g++ -std=c++11 $(var OPENMP_CXXFLAGS) $(var SIMD_FLAGS) $(var CPUEXT_FLAGS) $(var CXXFLAGS) \
    -I"$src/include" $(var FFTW_CPPFLAGS) "$here/exafmm_t_driver.cpp" -o "$driver" \
    -lpthread -lm $(var BLAS_LIBS) $(var LAPACK_LIBS) $(var FFTW_LIBS)
fi

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS="$threads"
echo "exafmm-t $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '(no git)') from $src, build $build," \
     "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"

if [ $own -eq 1 ]; then
  scratch="$peers/own-runs"; mkdir -p "$scratch"
  for run in "fmm_laplace -P 5 -c 300" "fmm_modified_helmholtz -P 5 -c 64 -k $k"; do
    set -- $run
    bin="$1"; shift
    # twice: the first run computes the operators and caches them in the
    # current folder, the second loads them (as when rerun by hand)
    for pass in cold warm; do
      out="$(cd "$scratch" && "$build/tests/$bin" -n "$n" -T "$threads" "$@")"
      echo "exafmm-t own $bin -n $n $* -T $threads ($pass):" \
        "$(echo "$out" | awk -F': ' '/^Total/{printf "Total %.3f s", $2} /^Potential Error/{printf ", pot err %.2e", $2} /^Gradient Error/{printf ", grad err %.2e", $2} /^Tree Depth/{printf ", depth %d", $2}')"
    done
  done
fi

if [ $ours -eq 1 ]; then
  repo="$(cd "$here/../.." && pwd)"
  (cd "$repo" && cargo build --release -q -p fmm-examples --example fmm_bench)
  args+=(--ours "$repo/target/release/examples/fmm_bench")
fi

python3 "$here/exafmm_t.py" --driver "$driver" "${args[@]}"
