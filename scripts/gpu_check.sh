#!/usr/bin/env bash
# One GPU run: correctness first, then timings; logs under $OUT, a short
# table last. Run from the repository root on the GPU host after
# scripts/stage_gpu.sh staged .gpu/ here. Usage: scripts/gpu_check.sh [quick]
set -u
source "$(dirname "$0")/gpu_unpack.sh"
OUT=${OUT:-/tmp/fmm-out}
mkdir -p "$OUT"
export FMM_CACHE_DIR=/tmp/fmm-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"

echo "== NVRTC compiles every built-in kernel"
timeout 300 .gpu/suite --ignored nvrtc_compile:: 2>&1 | tail -4 | tee "$OUT/tests.log"
echo "== GPU against CPU"
timeout 500 .gpu/suite --ignored --test-threads=1 --nocapture gpu:: 2>&1 | tee -a "$OUT/tests.log" | grep -E "test |M = |result|panicked|compile"

bench() { # kernel precision n [m]
  local extra=""; [ -n "${4:-}" ] && extra="--m $4"
  timeout 300 .gpu/direct_bench --backend cuda --kernel "$1" --precision "$2" --n "$3" $extra --repeat 5 --check --json /tmp/b.json >>"$OUT/bench.log" 2>&1 \
    && cat /tmp/b.json >>"$OUT/bench.jsonl" || echo "bench $* failed" | tee -a "$OUT/bench.log"
}
echo "== benchmarks"
for k in gravity biot-savart velocity-stretching; do
  bench $k f32 1048576
  bench $k f32 4096
done
if [ "${1:-}" != quick ]; then
  for k in coulomb stretching hu-biot-savart; do bench $k f32 1048576; done
  for k in gravity biot-savart; do bench $k f64 262144; done
fi
python3 - "$OUT/bench.jsonl" <<'PY'
import json, sys
print(f"{'kernel':20} {'prec':4} {'N':>8} {'inter/s':>10} {'GFLOP/s':>8} {'wGFLOP/s':>8} {'error':>9}  gpu")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{r['kernel']:20} {r['precision']:4} {r['n']:8} {r['interactions_per_s']:10.3e} {r['gflops']:8.0f} {r['gflops_weighted']:8.0f} {r['relative_l2_error'] or 0:9.2e}  {r['gpu_note']}")
PY
