#!/usr/bin/env bash
# How the treecode's time grows with N: gravity, theta 0.5, Plummer sphere,
# N from 10^5 to 10^7, and the fitted slope of log(time) against log(N)
# (N log N over this range fits a slope of about 1.1; N^2 would be 2).
# Usage: scripts/tree_scaling.sh [cpu|cuda] [BINARY]
# (BINARY: a built tree_bench, for the GPU host where there is no cargo.)
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-cpu}
bin=${2:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet --example tree_bench
  bin=./target/release/examples/tree_bench
fi
rows=$(mktemp)
for n in 100000 300000 1000000 3000000 10000000; do
  repeat=3; [ "$backend" = cpu ] && [ $n -ge 3000000 ] && repeat=1
  "$bin" --backend "$backend" --n $n --dist plummer --theta 0.5 --repeat $repeat \
    --samples 0 --json "$rows.json" >/dev/null
  cat "$rows.json" >>"$rows"
done
python3 - "$rows" "$backend" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"backend {sys.argv[2]}: gravity, theta 0.5, Plummer")
print("| N | time (s) | build (s) | time / (N log2 N) (ns) |")
print("| --- | --- | --- | --- |")
for r in rows:
    n = r["n"]
    print(f"| {n:.0e} | {r['seconds']:.4f} | {r['tree_seconds']:.4f} | {r['seconds'] / (n * math.log2(n)) * 1e9:.3f} |")
xs = [math.log(r["n"]) for r in rows]
ys = [math.log(r["seconds"]) for r in rows]
mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
nlogn = [math.log(r["n"] * math.log(r["n"])) for r in rows]
ref = (nlogn[-1] - nlogn[0]) / (xs[-1] - xs[0])
print(f"fitted slope of log(time) against log(N): {slope:.3f} (N log N gives {ref:.3f}, N^2 gives 2)")
PY
rm -f "$rows" "$rows.json"
