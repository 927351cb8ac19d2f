#!/usr/bin/env bash
# On the GPU host: unpacks .gpu/bin.tar.xz (scripts/stage_gpu.sh) into .gpu/
# once. Sourced by the scripts/gpu_*.sh that run .gpu/<name>.
if [ -f .gpu/bin.tar.xz ] && [ ! -x .gpu/suite ]; then
  tar -C .gpu -xJf .gpu/bin.tar.xz
fi
