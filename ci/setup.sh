#!/usr/bin/env bash
# Sets evermind-vk up from nothing on Debian 12 (or any apt system): Debian packages, a project
# virtualenv (.venv), kp 0.9.0 built from its PyPI sdist with ci/patches applied and no network
# fetches by CMake, then this package with its test, plot (matplotlib) and progress (tqdm) extras. Re-running skips finished steps.
#
#   bash ci/setup.sh            # everything
#   EVERMIND_VENV=/path ...     # put the virtualenv elsewhere
#   PYTHON=python3.12 ...       # build for another interpreter (>= 3.11)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${EVERMIND_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
CACHE=$ROOT/.cache/setup
KP_VERSION=0.9.0
KP_SHA256=98e583dc6e9731ff6d7a3e3317817e4d93f7b2945929619e29a56325db279949
PYBIND11_SPEC='pybind11>=2.12,<4'
APT_PACKAGES=(cmake g++ make patch libvulkan-dev libfmt-dev mesa-vulkan-drivers vulkan-validationlayers)

say() { printf '[setup] %s\n' "$*"; }

# 1. Debian packages -------------------------------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if ! command -v apt-get >/dev/null; then
        say "missing system packages: ${missing[*]} (and no apt-get here): install their equivalents, then re-run" >&2
        exit 2
    fi
    if [ "$(id -u)" = 0 ]; then SUDO=""
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo"
    else
        say "missing Debian packages: ${missing[*]}" >&2
        say "run this as root, then re-run ci/setup.sh:" >&2
        echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 2
    fi
    say "installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    say "Debian packages present"
fi

# 2. Python virtualenv -----------------------------------------------------------------------------
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    say "$PYTHON is $("$PYTHON" -V 2>&1); evermind-vk needs Python >= 3.11 (set PYTHON=...)" >&2; exit 2; }
if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtualenv $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
say "build tools in the virtualenv (pip, setuptools, wheel, pybind11, numpy)"
"$PY" -m pip install -q --disable-pip-version-check --upgrade pip setuptools wheel "$PYBIND11_SPEC" numpy

# 3. kp 0.9.0, patched -----------------------------------------------------------------------------
stamp=$( { cat "$ROOT"/ci/patches/*.patch; "$PY" -VV; "$PY" -c 'import pybind11; print(pybind11.__version__)'; } | sha256sum | cut -c1-16)
if [ -f "$VENV/.kp-stamp" ] && [ "$(cat "$VENV/.kp-stamp")" = "$stamp" ] && "$PY" -c 'import kp' 2>/dev/null; then
    say "kp $KP_VERSION (patched) already built for this venv"
else
    mkdir -p "$CACHE"
    sdist="$CACHE/kp-$KP_VERSION.tar.gz"
    if [ ! -f "$sdist" ]; then
        say "downloading the kp $KP_VERSION sdist"
        "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "kp==$KP_VERSION" -d "$CACHE"
    fi
    echo "$KP_SHA256  $sdist" | sha256sum -c --quiet - || { say "kp sdist checksum mismatch: $sdist" >&2; exit 3; }
    src="$CACHE/src-$stamp"
    rm -rf "$src" && mkdir -p "$src"
    tar xzf "$sdist" -C "$src"
    for p in "$ROOT"/ci/patches/*.patch; do
        say "applying $(basename "$p")"
        patch -d "$src/kp-$KP_VERSION" -p1 --quiet --forward < "$p"
    done
    say "building kp (CMake, no network fetches; ~2 minutes on 2 cores)"
    pybind_dir=$("$PY" -c 'import pybind11; print(pybind11.get_cmake_dir())')
    rm -rf "$CACHE/wheels" && mkdir -p "$CACHE/wheels"
    env CMAKE_PREFIX_PATH="$pybind_dir" pybind11_DIR="$pybind_dir" \
        KOMPUTE_OPT_USE_BUILT_IN_SPDLOG=OFF KOMPUTE_OPT_USE_BUILT_IN_FMT=OFF \
        KOMPUTE_OPT_USE_BUILT_IN_GOOGLE_TEST=OFF KOMPUTE_OPT_USE_BUILT_IN_PYBIND11=OFF \
        KOMPUTE_OPT_USE_BUILT_IN_VULKAN_HEADER=OFF KOMPUTE_OPT_INSTALL=OFF \
        KOMPUTE_OPT_DISABLE_VK_DEBUG_LAYERS=ON \
        "$PY" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
        "$src/kp-$KP_VERSION" -w "$CACHE/wheels"
    "$PY" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$CACHE"/wheels/kp-*.whl
    rm -rf "$src"
    echo "$stamp" > "$VENV/.kp-stamp"
fi

# 4. this package ----------------------------------------------------------------------------------
say "installing evermind-vk (editable, with the test, plot and progress extras)"
# setuptools' editable finder prints an information-only notice ("Editable installation. Please be careful with
# folders ... same name as your package") for any package-dir mapping, and ours maps generated/ to
# evermind_vk.generated; the filter silences that notice alone.
PYTHONWARNINGS="ignore:Editable installation" \
    "$PY" -m pip install -q --disable-pip-version-check -e "$ROOT[test,plot,progress]"
# Optional: PyTorch for the parity tests, benchmark baselines and data-parallel tests (the `dist` extra)
# (EVERMIND_TORCH=1; CI sets it, since
# its image carries the CPU build of torch 2.13.0 locally; elsewhere PyPI serves a large CUDA build).
if [ "${EVERMIND_TORCH:-0}" = 1 ] && ! "$PY" -c 'import torch' 2>/dev/null; then
    say "installing torch 2.13.0 (EVERMIND_TORCH=1)"
    "$PY" -m pip install -q --disable-pip-version-check "torch==2.13.0"
fi
"$PY" -c 'import kp, numpy; print("[setup] kp", kp.__version__, "numpy", numpy.__version__)'
