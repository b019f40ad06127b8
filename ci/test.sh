#!/usr/bin/env bash
# Sets up (if needed) and runs the whole test suite on the default Vulkan device (lavapipe on a
# machine without a GPU). Extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/ci/setup.sh"
PY=${EVERMIND_VENV:-$ROOT/.venv}/bin/python
cd "$ROOT"
"$PY" tools/codegen.py --check
"$PY" -m pytest -q "$@"
