#!/usr/bin/env bash
# "Tolerance vs best explicit vs direct" (issue 27): for each row, one run
# of `fmm_bench --method tolerance`, one of the direct sum, and a sweep of
# explicit FMM settings (theta 0.5 to 0.7; Laplace p 4 to 14, Chebyshev
# nodes p 2 to 5) and of the treecode (theta 0.3 to 0.8) from which the
# fastest that meets the tolerance on the benchmark's 256 sampled targets
# is the "best explicit". Prints one
# table row per case: times per evaluation (median of --repeat, the first
# evaluation apart) and their ratios.
#
# Usage: scripts/tolerance_table.sh BACKEND PRECISION "KERNEL N TOL [EXTRA FLAGS]" ...
#   e.g. scripts/tolerance_table.sh cpu f64 "gravity 10000 1e-6 --params 0"
# BIN (default target/release/examples) holds fmm_bench; OUT the logs;
# SWEEP=tree sweeps the treecode alone (is it sooner than the tolerance's
# choice?).
set -uo pipefail
backend=$1
precision=$2
shift 2
BIN=${BIN:-target/release/examples}
OUT=${OUT:-/tmp/tolerance_table}
REPEAT=${REPEAT:-3}
mkdir -p "$OUT"
bench() { timeout "${LIMIT:-300}" "$BIN/fmm_bench" --backend "$backend" --precision "$precision" "$@"; }
echo "| kernel | N | tol | flags | tolerance: chose | time (first) | best explicit | time | direct | tolerance / best | tolerance / direct |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for row in "$@"; do
  read -r kernel n tol extra <<<"$row"
  tag=$(echo "$kernel-$n-$tol-$extra" | tr ' /' '__')
  bench --kernel "$kernel" --n "$n" --method tolerance --tol "$tol" --repeat "$REPEAT" $extra --json "$OUT/$tag.tol.json" >"$OUT/$tag.tol.log" 2>&1
  bench --kernel "$kernel" --n "$n" --method direct $extra --repeat 1 --json "$OUT/$tag.direct.json" >"$OUT/$tag.direct.log" 2>&1
  # The sweep: the Laplace expansions and Chebyshev nodes (a kernel
  # without a Laplace far field refuses the first: those rows are empty);
  # SWEEP=tree leaves them out.
  [ "${SWEEP:-all}" = tree ] || for far in laplace ki; do
    case $far in laplace) ps="4 6 8 10 12 14";; ki) ps="2 3 4 5";; esac
    for theta in 0.5 0.6 0.7; do
      for p in $ps; do
        bench --kernel "$kernel" --n "$n" --method fmm --far-field "$far" --p "$p" --theta "$theta" --repeat "$REPEAT" $extra --json "$OUT/$tag.$far.p$p.t$theta.json" >"$OUT/$tag.$far.p$p.t$theta.log" 2>&1
      done
    done
  done
  # The treecode (the kernel's default far field: the monopole where there
  # is a Laplace far field, else Chebyshev nodes of order 6).
  for theta in 0.3 0.4 0.5 0.6 0.7 0.8; do
    bench --kernel "$kernel" --n "$n" --method tree --theta "$theta" --repeat "$REPEAT" $extra --json "$OUT/$tag.tree.t$theta.json" >"$OUT/$tag.tree.t$theta.log" 2>&1
  done
  python3 - "$OUT" "$tag" "$kernel" "$n" "$tol" "$extra" <<'EOF'
import glob, json, sys
out, tag, kernel, n, tol, extra = sys.argv[1:]
tol = float(tol)
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
t = load(f"{out}/{tag}.tol.json")
d = load(f"{out}/{tag}.direct.json")
best = None
for p in glob.glob(f"{out}/{tag}.laplace.p*.json") + glob.glob(f"{out}/{tag}.ki.p*.json") + glob.glob(f"{out}/{tag}.tree.t*.json"):
    r = load(p)
    if r:
        r["_far"] = "tree" if ".tree." in p else ("ki" if ".ki." in p else "laplace")
    if r and r["relative_l2_error"] is not None and r["relative_l2_error"] <= tol:
        if best is None or r["seconds"] < best["seconds"]:
            best = r
f = lambda x: f"{x:.3g} s" if x is not None else "-"
ts = t["seconds"] if t else None
bs = best["seconds"] if best else None
ds = d["seconds"] if d else None
ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"
chose = (t or {}).get("chose") or "failed"
first = f"{ts:.3g} s ({t['first']:.3g} s)" if t else "-"
def named(b):
    if b["_far"] == "tree":
        return f"treecode theta {b['theta']}"
    return f"{b['_far']} p {b['p']} theta {b['theta']}"
bx = f"{named(best)} ({best['relative_l2_error']:.1e})" if best else "none of the sweep met it"
print(f"| {kernel} | {n} | {tol:g} | {extra} | {chose} | {first} | {bx} | {f(bs)} | {f(ds)} | {ratio(ts, bs)} | {ratio(ts, ds)} |")
EOF
done
