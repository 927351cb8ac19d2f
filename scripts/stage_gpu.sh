#!/usr/bin/env bash
# Builds what a GPU run needs (release test executables and benchmarks) on
# the development machine and stages them, stripped, in .gpu/ (ignored by
# git). The device tool carries .gpu/ and scripts/gpu_check.sh runs there.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu
cargo build --release --example direct_bench --example custom_kernel --example tree_bench --example fmm_bench
cp target/release/examples/direct_bench target/release/examples/custom_kernel target/release/examples/tree_bench target/release/examples/fmm_bench .gpu/
# The test suite (one executable: the GPU tests are modules of it, run by
# module name, `.gpu/suite --ignored gpu_fmm::`); cargo names it.
cargo test --release -p fmm-tests --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "suite":
        shutil.copy(m["executable"], ".gpu/" + m["target"]["name"])
'
strip .gpu/*
ls -la .gpu
