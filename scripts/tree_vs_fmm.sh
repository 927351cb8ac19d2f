#!/usr/bin/env bash
# Whether the treecode would meet a tolerance sooner than Method::tolerance
# (which weighs the direct sum against the FMM): for each row, one run of
# `fmm_bench --method tolerance` and the treecode at theta 0.3 to 0.8 (its
# default far field: the monopole where the kernel has a Laplace far
# field). Prints a table row per case: the tolerance's choice and time,
# the fastest treecode that meets the tolerance on the benchmark's 256
# sampled targets, and their ratio.
# Usage: scripts/tree_vs_fmm.sh BACKEND PRECISION "KERNEL N TOL [FLAGS]" ...
# BIN (default target/release/examples) holds fmm_bench; OUT the logs;
# REPEAT evaluations timed (default 3).
set -uo pipefail
backend=$1
precision=$2
shift 2
BIN=${BIN:-target/release/examples}
OUT=${OUT:-/tmp/tree_vs_fmm}
REPEAT=${REPEAT:-3}
mkdir -p "$OUT"
bench() { timeout "${LIMIT:-300}" "$BIN/fmm_bench" --backend "$backend" --precision "$precision" "$@"; }
echo "| kernel | N | tol | flags | tolerance: chose | time | error | fastest treecode that meets it | time | error | tolerance / treecode |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for row in "$@"; do
  read -r kernel n tol extra <<<"$row"
  tag=$(echo "$kernel-$n-$tol-$extra" | tr ' /' '__')
  bench --kernel "$kernel" --n "$n" --method tolerance --tol "$tol" --repeat "$REPEAT" $extra --json "$OUT/$tag.tol.json" >"$OUT/$tag.tol.log" 2>&1
  for theta in 0.3 0.4 0.5 0.6 0.7 0.8; do
    bench --kernel "$kernel" --n "$n" --method tree --theta "$theta" --repeat "$REPEAT" $extra --json "$OUT/$tag.tree.t$theta.json" >"$OUT/$tag.tree.t$theta.log" 2>&1
  done
  python3 - "$OUT" "$tag" "$kernel" "$n" "$tol" "$extra" <<'PY'
import glob, json, sys
out, tag, kernel, n, tol, extra = sys.argv[1:]
tol = float(tol)
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
t = load(f"{out}/{tag}.tol.json")
best = None
for p in glob.glob(f"{out}/{tag}.tree.t*.json"):
    r = load(p)
    if r and r["relative_l2_error"] is not None and r["relative_l2_error"] <= tol:
        if best is None or r["seconds"] < best["seconds"]:
            best = r
f = lambda x: f"{x:.3g} s" if x is not None else "-"
e = lambda r: f"{r['relative_l2_error']:.1e}" if r and r["relative_l2_error"] is not None else "-"
ts = t["seconds"] if t else None
bs = best["seconds"] if best else None
chose = (t or {}).get("chose") or "failed"
bx = f"theta {best['theta']}" if best else "none met it"
ratio = f"{ts / bs:.2f}" if ts and bs else "-"
print(f"| {kernel} | {n} | {tol:g} | {extra} | {chose} | {f(ts)} | {e(t)} | {bx} | {f(bs)} | {e(best)} | {ratio} |")
PY
done
