#!/usr/bin/env bash
# Accuracy tables of the FMM's far fields for every kernel issue 14 names
# (order p, MAC theta, far field): one markdown row per run, the relative
# L2 error of all outputs on 500 sampled targets against the f64 direct
# sum, the time of a second evaluation (the compressed M2L's operators
# kept from the first) and of the first (2 threads unless
# RAYON_NUM_THREADS says otherwise):
#   bash scripts/accuracy_tables.sh [N]        (default N = 10^5)
# Points uniform in the unit cube, strengths of random sign, f64, CPU.
# Softening and core radii in mean spacings h = N^(-1/3): regularised
# Stokeslet eps h/2 (fmm_bench's default), softened gravity eps = h,
# Gaussian-core Biot-Savart sigma = 4h with leaves of 64 (sigma larger than
# a leaf's side, about 2.9h at 10^5).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-100000}"
cargo build --release --quiet --example fmm_bench
bench=target/release/examples/fmm_bench
export RAYON_NUM_THREADS="${RAYON_NUM_THREADS:-2}"
h=$(python3 -c "print(1.0 / $n ** (1.0 / 3.0))")
echo "$(date -u +%F), $(nproc) cores ($RAYON_NUM_THREADS threads), $(lscpu | sed -n 's/^Model name: *//p'), N = $n, h = $h"
echo
echo "| kernel | far field | p | theta | error | seconds | first evaluation |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
row() { # label, far field, p, theta, then fmm_bench arguments
  local label=$1 far=$2 p=$3 theta=$4; shift 4
  local out
  out=$("$bench" --n "$n" --precision f64 --repeat 1 --samples 500 --far-field "$far" --p "$p" \
        --theta "$theta" "$@" 2>&1) || { echo "| $label | $far | $p | $theta | failed: $(echo "$out" | tail -1) | | |"; return; }
  local err secs first
  err=$(echo "$out" | sed -n 's/^relative L2 error *\([0-9.e+-]*\).*/\1/p')
  secs=$(echo "$out" | sed -n 's/^time per evaluation *\([0-9.]*\) s.*/\1/p')
  first=$(echo "$out" | sed -n 's/^first evaluation *\([0-9.]*\) s.*/\1/p')
  echo "| $label | $far | $p | $theta | $err | $secs | $first |"
}
for theta in 0.8 0.7; do
  for p in 2 3 4 5; do row "Stokeslet, eps h/2" ki $p $theta --kernel stokeslet; done
done
for theta in 0.8 0.7; do
  for p in 2 3 4 5; do row "singular Stokeslet" ki $p $theta --kernel stokeslet-singular; done
done
for theta in 0.8 0.7; do
  for p in 2 3 4 5 6; do row "Yukawa, lambda 20" ki $p $theta --kernel yukawa --params 20; done
done
for p in 2 3 4 5 6; do row "gravity, eps h" ki $p 0.7 --kernel gravity --params "$h"; done
row "gravity, eps h" laplace 8 0.6 --kernel gravity --params "$h"
for p in 2 3 4 5 6; do row "Biot-Savart, Gaussian core 4h" ki $p 0.7 --kernel biot-savart --core 4 --ncrit 64; done
row "Biot-Savart, Gaussian core 4h" laplace 8 0.6 --kernel biot-savart --core 4 --ncrit 64
for p in 4 6 8 10; do row "Coulomb" laplace $p 0.6 --kernel coulomb; done
for p in 3 5 7; do row "Coulomb" ppm $p 0.6 --kernel coulomb; done
for p in 3 4 5 6; do row "Coulomb" ki $p 0.7 --kernel coulomb; done
