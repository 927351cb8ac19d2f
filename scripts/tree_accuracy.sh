#!/usr/bin/env bash
# The treecode's accuracy table: percentiles (50, 90, 99) of the per-target
# relative force (or velocity) error against the f64 direct sum on 512
# sampled targets, for theta from 0.3 to 0.9, on a uniform cube and a
# Plummer sphere, for gravity (N = 100000) and Biot-Savart (N = 20000), in
# f64 so that only the method's error shows. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --example tree_bench
echo "| kernel | distribution | N | theta | 50% | 90% | 99% | time (s) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for spec in "gravity 100000" "biot-savart 20000"; do
  set -- $spec
  for dist in uniform plummer; do
    for theta in 0.3 0.5 0.7 0.9; do
      out=$(./target/release/examples/tree_bench --kernel "$1" --n "$2" --dist "$dist" --theta "$theta" \
        --precision f64 --repeat 1 --samples 512)
      p=$(echo "$out" | sed -n 's/^force error *\([^ ]*\) (50%), \([^ ]*\) (90%), \([^ ]*\) (99%).*/\1 | \2 | \3/p')
      t=$(echo "$out" | sed -n 's/^time per evaluation *\([^ ]*\) s.*/\1/p')
      echo "| $1 | $dist | $2 | $theta | $p | $t |"
    done
  done
done
