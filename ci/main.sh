#!/usr/bin/env bash
# Sets up (if needed) and runs the main job on the default Vulkan device: train a small language model
# on the embedded default corpus (its last 5% held out), write runs/default/{model.safetensors,config.json,
# loss.png,losses.csv}, print the held-out perplexity before and after training and a sample.
# Extra arguments go to `evermind-vk train` (e.g. --time-limit 0 --epochs 3 --d-model 256 on a GPU).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/ci/setup.sh"
cd "$ROOT"
"${EVERMIND_VENV:-$ROOT/.venv}/bin/evermind-vk" train "$@"
