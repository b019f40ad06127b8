"""Out of memory is a typed DeviceError, not a crash (ci/patches/0006-allocation-errors.patch)."""
import subprocess
import sys

import pytest

CODE = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, -1))
import evermind_vk as ev
keep = []
try:
    for _ in range(40):
        keep.append(ev.empty((1 << 25,)))
    print("allocated all", len(keep))
except ev.DeviceError as e:
    print("DeviceError after", len(keep), "tensors:", e)
    del keep
    x = ev.tensor([1.0, 2.0, 3.0])  # the device still works after the failure
    print("still works:", (x + x).numpy().tolist())
"""


def test_out_of_memory_is_a_device_error(device):
    if device.info.type != "cpu":  # RLIMIT_AS bounds lavapipe's (host) memory, not a GPU's own memory
        pytest.skip("the address-space limit exhausts only a CPU device's memory")
    # 40 x 128 MiB under a 3 GiB address-space limit: stock kp bound a null memory handle and the
    # interpreter died with SIGSEGV (exit 139).
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    assert "DeviceError after" in out.stdout and "vkAllocateMemory" in out.stdout, out.stdout
    assert "still works: [2.0, 4.0, 6.0]" in out.stdout, out.stdout
