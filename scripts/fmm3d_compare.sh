#!/usr/bin/env bash
# Our CPU FMM against FMM3D (fmm3dpy from PyPI) on the same points, side by
# side in one run. Arguments go to scripts/fmm3d_compare.py (--n, --p,
# --theta, --eps, --precision, --repeat). Needs numpy and fmm3dpy:
#   python3 -m pip install numpy fmm3dpy
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --example fmm_bench
python3 scripts/fmm3d_compare.py "$@"
