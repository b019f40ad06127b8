#!/usr/bin/env bash
# The large-model training benchmarks and the tensor-core evidence on an NVIDIA GPU host (see ci/gpu-env.sh
# for what to bring: .gl/ and .whl/). Usage: bash bench/gpu_perf.sh OUTDIR CONFIG [train_bench args...]
#   CONFIG: a bench/train_bench.py preset (124m, 350m, 23.7m ...), "ir" for the pipeline internal
#   representations of the f16 cooperative-matrix kernels (does the driver emit Hopper's warpgroup MMA?),
#   "decode-tests" for the tests of what has run only on lavapipe so far (the lifetime-planned recordings, the
#   fused decode kernels, decode chains; pytest -n 8 where pytest-xdist is carried),
#   "gen" for bench/generate_bench.py (the extra args go to it), or "chain" for generate_bench.py at
#   EVERMIND_VK_DECODE_CHAIN = 1, 4, 8, 16 (PyTorch eager in the first run only; the evidence behind
#   select.decode TUNED["CHAIN"]: bench/results/evidence/decode-chain.txt).
# ci/gpu-env.sh sets PYTHONSAFEPATH (import the installed package, not the source tree); the benchmark scripts
# import their PyTorch twins from bench/, the script's directory, which PYTHONSAFEPATH leaves off sys.path:
# they run without it (python prepends bench/, never the repo root, for a script).
set -uo pipefail
OUT=${1:?output directory}; CONFIG=${2:?config}; shift 2
mkdir -p "$OUT"
source ci/gpu-env.sh || exit 1
nvidia-smi --query-gpu=name,uuid,memory.total,clocks.max.sm,driver_version --format=csv | tee "$OUT/gpu-$CONFIG.txt"
git log -1 --format='commit %H %s' 2>/dev/null | tee -a "$OUT/gpu-$CONFIG.txt"
if [ "$CONFIG" = ir ]; then
    rm -rf /tmp/ir && mkdir -p /tmp/ir
    python3 bench/pipeline_stats.py --ir --dump /tmp/ir \
        --only "${IR_ONLY:-matmul_f16_cm_rb4x4_w2x4_t128x256,matmul_f16_cm2_l256_t128x256k32,matmul_f16_cm2_l256_t128x128}" \
        2>&1 | tee "$OUT/pipeline-ir.txt"
    {   echo "== per dump: counts of MMA instruction mnemonics (HGMMA = Hopper warpgroup MMA, HMMA = warp MMA)"
        for f in /tmp/ir/*; do
            printf '%s  HGMMA=%s HMMA=%s WARPGROUP=%s\n' "$(basename "$f")" "$(grep -c 'HGMMA' "$f")" \
                "$(grep -c 'HMMA' "$f")" "$(grep -ci 'WARPGROUP' "$f")"
        done; } | tee "$OUT/pipeline-ir-mma.txt"
    tar czf "$OUT/ir-dumps.tgz" -C /tmp ir
    exit 0
fi
if [ "$CONFIG" = decode-tests ]; then
    PAR=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8 --dist loadfile")
    python3 -m pytest -q -p no:cacheprovider -o addopts="" -ra $PAR tests/runtime/test_record_reuse.py \
        tests/runtime/test_barriers.py tests/train tests/ops/test_hybrid_attn_decode.py tests/ops/test_decode_layer.py \
        tests/ops/test_mamba_decode.py tests/ops/test_evermind_layer.py "$@" 2>&1 | tee "$OUT/decode-tests.txt"
    exit 0
fi
if [ "$CONFIG" = chain ]; then
    for c in 1 4 8 16; do
        echo "== EVERMIND_VK_DECODE_CHAIN=$c" | tee -a "$OUT/decode-chain.txt"
        T=$([ "$c" = 1 ] || echo --no-torch)
        EVERMIND_VK_DECODE_CHAIN=$c env -u PYTHONSAFEPATH python3 bench/generate_bench.py \
            --models tf,evermind,mamba,mamba-attn --batch 1,8,32 --repeats 2 --compile off $T "$@" 2>&1 \
            | tee -a "$OUT/decode-chain.txt"
    done
    for k in 1 8; do  # the per-kernel profile behind the claim: one step, and one replay of 8
        python3 -m evermind_vk profile --generate --model mamba --batch-size 8 --chain $k --repeats 5 2>&1 \
            | tee -a "$OUT/decode-chain-profile.txt"
    done
    exit 0
fi
if [ "$CONFIG" = gen ]; then
    env -u PYTHONSAFEPATH python3 bench/generate_bench.py --json --out "$OUT/generate_bench.json" "$@" 2>&1 \
        | tee "$OUT/generate_bench.txt"
    exit 0
fi
cd bench && env -u PYTHONSAFEPATH python3 train_bench.py --config "$CONFIG" --json "$OUT/train_bench-$CONFIG.json" "$@" 2>&1 \
    | tee "$OUT/train_bench-$CONFIG.txt"
