#!/usr/bin/env bash
# The rows of docs/ACCURACY.md's "tolerance vs best explicit vs direct"
# table, through scripts/tolerance_table.sh (one run of --method
# tolerance, the direct sum and an explicit sweep per row).
# Usage: scripts/tolerance_rows.sh cpu|gpu1|gpu2|gpu3 (the GPU rows split
# in calls of under ten minutes each; run there from the
# repository root after scripts/stage_gpu.sh, BIN=.gpu). OUT, REPEAT and
# LIMIT as tolerance_table.sh takes them.
set -uo pipefail
here=$(dirname "$0")
case ${1:-cpu} in
cpu)
  # f64 on 2 cores: gravity without softening and softened by half a
  # spacing (the benchmark's default parameters), Biot-Savart with cores of
  # one and three spacings, velocity + stretching, the regularised
  # Stokeslet, Yukawa and a Gaussian RBF sum (declared in the examples);
  # coherent and random strengths; 1e-3 to 1e-8.
  bash "$here/tolerance_table.sh" cpu f64 \
    "gravity 1000 1e-6 --params 0" \
    "gravity 10000 1e-3 --params 0" \
    "gravity 100000 1e-3 --params 0" \
    "gravity 100000 1e-6 --params 0" \
    "gravity 100000 1e-8 --params 0 --strengths random" \
    "gravity 100000 1e-5" \
    "gravity 30000 1e-8 --params 0.02 --strengths random" \
    "biot-savart 100000 1e-4 --strengths random" \
    "biot-savart 30000 1e-4 --core 3 --strengths random" \
    "velocity-stretching 30000 1e-5" \
    "stokeslet 20000 1e-6" \
    "yukawa 30000 1e-5 --strengths random" \
    "gaussian-rbf 40000 1e-4 --params 0.1 --strengths random" \
    "gaussian-rbf 40000 1e-7 --params 0.1 --strengths random"
  ;;
gpu1)
  export BIN=${BIN:-.gpu}
  bash "$here/tolerance_table.sh" cuda f32 \
    "gravity 1000 1e-4 --params 0" \
    "gravity 100000 1e-4 --params 0" \
    "gravity 1000000 1e-3 --params 0 --resident" \
    "gravity 1000000 1e-5 --params 0 --resident" \
    "gravity 1000000 1e-4 --resident"
  ;;
gpu2)
  export BIN=${BIN:-.gpu}
  bash "$here/tolerance_table.sh" cuda f32 \
    "biot-savart 1000000 1e-4 --core 3 --strengths random --resident" \
    "velocity-stretching 1000000 1e-4 --resident" \
    "stokeslet 100000 1e-4" \
    "yukawa 100000 1e-4 --strengths random" \
    "gaussian-rbf 100000 1e-4 --params 0.1 --strengths random"
  ;;
gpu3)
  # 10^7 points, the particles kept on the GPU.
  export BIN=${BIN:-.gpu}
  bash "$here/tolerance_table.sh" cuda f32 \
    "gravity 10000000 1e-3 --params 0 --resident" \
    "gravity 10000000 1e-5 --params 0 --resident" \
    "velocity-stretching 10000000 1e-4 --resident"
  ;;
esac
