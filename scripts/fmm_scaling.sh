#!/usr/bin/env bash
# FMM time against N (gravity, f32, uniform cube, --params 0) and the fitted
# slope of log(time) against log(N).
# Usage: scripts/fmm_scaling.sh [cpu|cuda] [BINARY] [N...]; the settings
# from FMM_SCALING_ARGS (default "--p 5 --theta 0.6").
set -u
settings=${FMM_SCALING_ARGS:---p 5 --theta 0.6}
backend=${1:-cpu}
bin=${2:-target/release/examples/fmm_bench}
shift 2 2>/dev/null
sizes=${*:-100000 300000 1000000 3000000 10000000}
out=$(mktemp)
for n in $sizes; do
  t=$(timeout 300 "$bin" --backend "$backend" --params 0 --n "$n" $settings \
        --samples 0 --repeat 3 2>/dev/null | awk '/^time per evaluation/ {print $4}')
  echo "N = $n  time $t s"
  echo "$n $t" >> "$out"
done
python3 - "$out" <<'PY'
import math, sys
pts = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
xs = [math.log(n) for n, _ in pts]; ys = [math.log(t) for _, t in pts]
mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
print(f"fitted slope {slope:.2f} over N = {int(pts[0][0])} .. {int(pts[-1][0])}")
PY
rm -f "$out"
