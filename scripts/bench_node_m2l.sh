#!/usr/bin/env bash
# The CPU's node far fields with M2L by compressed operators (the default)
# and by the kernel, side by side on the same points (one run each, the
# error on 1000 sampled targets against an f64 direct sum):
#   bash scripts/bench_node_m2l.sh [N]        (default N = 10^6)
# MODES="compressed" skips the runs by the kernel (minutes at 10^6).
# "time per evaluation" follows an untimed first evaluation, also printed:
# the compressed operators are computed there and kept.
# Builds fmm_bench in release first. Prints one block per run.
set -euo pipefail
n="${1:-1000000}"
cargo build --release --quiet --example fmm_bench
bench=target/release/examples/fmm_bench
echo "$(date -u +%F) $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), N = $n"
run() {
  for m in ${MODES:-compressed kernel}; do
    echo "== $* --node-m2l $m"
    "$bench" --n "$n" --repeat 1 --samples 1000 --node-m2l "$m" "$@" 2>&1 \
      | grep -E "time per|first eval|M2L  |P2P  |relative|compressed M2L|work"
  done
}
run --kernel stokeslet --precision f32 --far-field ki --p 3 --theta 0.8
run --kernel gravity --precision f32 --far-field ki --p 4 --theta 0.8
run --kernel coulomb --precision f64 --far-field ki --p 4 --theta 0.8
run --kernel yukawa --params 20 --precision f64 --far-field ki --p 4 --theta 0.8
