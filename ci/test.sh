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
# numpy 1.26 as well as 2.x (EVERMIND_NUMPY1=1; CI sets it): the transfer, kernel and persistence tests
# again with numpy 1.26.4 first on the path.
if [ "${EVERMIND_NUMPY1:-0}" = 1 ]; then
    NP1="$ROOT/.cache/numpy1"
    [ -d "$NP1/numpy" ] || "$PY" -m pip install -q --disable-pip-version-check --target "$NP1" "numpy==1.26.4"
    PYTHONPATH="$NP1" "$PY" -c 'import numpy; assert numpy.__version__ == "1.26.4", numpy.__version__'
    PYTHONPATH="$NP1" "$PY" -m pytest -q -p no:cacheprovider tests/runtime/test_tensor.py tests/ops/test_matmul.py \
        tests/train/test_optim.py tests/io/test_persistence.py
fi
