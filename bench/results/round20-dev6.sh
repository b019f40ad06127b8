#!/usr/bin/env bash
# round 20: A/B of the f16 step (e57a91a vs HEAD: fused unscale + matmul_master) on one machine, then the suite
# A copy of the gitignored runs/dev6.sh that made round 20's fused-* files. It ran in the repo root on the GPU
# host with carry .gl, .whl, runs (see ../shared/notes/gpu-host.md). It expects:
#   runs/TREE     one line: the commit under test (git log --oneline -1)
#   runs/old      `git archive e57a91a`, without bench/results, tests and generated
#   runs/old-gen  generated/ files that differ between e57a91a and HEAD, taken from e57a91a
set -uo pipefail
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
source ci/gpu-env.sh || exit 1
TREE=$(cat runs/TREE)
hdr() {
  { echo "# round 20 (2026-12-06), machine ${MACH:-?}; run by runs/dev6.sh (ci/gpu-env.sh, then the command below)"
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm --format=csv,noheader
    echo "# tree: ${3:-$TREE}"
    echo "# $2"; } > "$OUT/$1"
}
run() { local f=$1 tree=$2; shift 2; hdr "$f" "$*" "$tree"; echo "== $f: $*"; ( "$@" ) >> "$OUT/$f" 2>&1; echo "rc=$?" >> "$OUT/$f"; grep -E "tokens/s|speed|host time|^rc=" "$OUT/$f" | head -30; }
nvidia-smi -L
case "${1:-bench}" in
  bench)
    cp -r generated runs/old/generated && cp -r runs/old-gen/generated/. runs/old/generated/
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/old-site runs/old || exit 1
    OLD="e57a91a (round 19's library: per-gradient loss_unscale, f16 dW cast back to f32)"
    NEWEV="--skip eager-f32 --skip eager-bf16 --skip compile-f32 --skip compile-bf16 --skip ev-f32"
    run train-23.7m-all.txt "" env -u PYTHONSAFEPATH python3 bench/train_bench.py --config 23.7m --steps 20 --warmup 5 --repeats 1 --json $OUT/train-all.json
    run train-23.7m-f16-old1.txt "$OLD" env -u PYTHONSAFEPATH PYTHONPATH=/tmp/old-site:$PYTHONPATH python3 runs/old/bench/train_bench.py --config 23.7m --steps 30 --warmup 5 --repeats 1 $NEWEV --json $OUT/old1.json
    run train-23.7m-f16-new1.txt "" env -u PYTHONSAFEPATH python3 bench/train_bench.py --config 23.7m --steps 30 --warmup 5 --repeats 1 $NEWEV --json $OUT/new1.json
    run train-23.7m-f16-old2.txt "$OLD" env -u PYTHONSAFEPATH PYTHONPATH=/tmp/old-site:$PYTHONPATH python3 runs/old/bench/train_bench.py --config 23.7m --steps 30 --warmup 5 --repeats 1 $NEWEV --json $OUT/old2.json
    run train-23.7m-f16-new2.txt "" env -u PYTHONSAFEPATH python3 bench/train_bench.py --config 23.7m --steps 30 --warmup 5 --repeats 1 $NEWEV --json $OUT/new2.json
    run train-tiny.txt "" env -u PYTHONSAFEPATH python3 bench/train_bench.py --config tiny --steps 20 --warmup 5 --repeats 1 --skip compile-f32 --skip compile-bf16 --json $OUT/tiny.json ;;
  suite) run pytest.txt "" python3 -m pytest -q -p no:cacheprovider -o addopts= -ra -n 8 --dist loadfile; tail -15 $OUT/pytest.txt ;;
esac
