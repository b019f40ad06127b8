#!/usr/bin/env bash
# The suite and the benchmarks on a GPU host (see ci/gpu-env.sh for what to bring).
# Usage: bash ci/gpu-host.sh OUTDIR [bench args...]
set -uo pipefail
OUT=${1:?output directory}; shift
mkdir -p "$OUT"
source ci/gpu-env.sh || exit 1
python3 -m evermind_vk devices | tee "$OUT/devices.txt"
# pytest-xdist, when carried in .whl/, runs the suite on 8 workers (4 min on the H200 instead of >8)
PAR=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8 --dist loadfile")
# -v: each test's outcome as it ends, so a run cut short by the device call's limit still names its failures
python3 -m pytest -v -p no:cacheprovider -o addopts="" -ra $PAR 2>&1 | tee "$OUT/pytest.txt"
python3 bench/bench.py --json "$OUT/bench.json" "$@" 2>&1 | tee "$OUT/bench.txt"
