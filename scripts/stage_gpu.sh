#!/usr/bin/env bash
# Builds what a GPU run needs (release test executables and benchmarks) on
# the development machine, strips them in target/gpu-stage/ and packs them
# into .gpu/bin.tar.xz (ignored by git; the stripped executables pass the
# device tool's 64 MiB carry, the packed ones do not). The device tool
# carries .gpu/; the scripts/gpu_*.sh there unpack it first
# (scripts/gpu_unpack.sh) and run .gpu/<name>.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=target/gpu-stage
rm -rf .gpu "$stage" && mkdir -p .gpu "$stage"
bins="direct_bench custom_kernel tree_bench fmm_bench vortex_ring vortex_step_bench vortex_wall vortex_taylor_green vortex_turbulence vortex_brownout"
cargo build --release $(for b in $bins; do echo --example $b; done)
for b in $bins; do cp target/release/examples/$b "$stage/"; done
# The test suite (one executable: the GPU tests are modules of it, run by
# module name, `.gpu/suite --ignored gpu_fmm::`); cargo names it.
cargo test --release -p fmm-tests --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "suite":
        shutil.copy(m["executable"], "'"$stage"'/" + m["target"]["name"])
'
strip "$stage"/*
tar -C "$stage" -cf - . | xz -6 -T2 > .gpu/bin.tar.xz
ls -la "$stage" .gpu
