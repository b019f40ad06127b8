#!/usr/bin/env bash
# Sets up (if needed) and runs the main job on the default Vulkan device.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/ci/setup.sh"
EV=${EVERMIND_VENV:-$ROOT/.venv}/bin/evermind-vk
"$EV" devices
"$EV" check "$@"
