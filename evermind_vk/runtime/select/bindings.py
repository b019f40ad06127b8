"""Storage-buffer bindings: how many one dispatch may bind on a device, and which variants fit."""
from __future__ import annotations

from ...errors import BindingLimitError

# Every kernel binds one storage buffer per tensor (templates/_interface.glsl.j2 declares nothing else:
# no uniforms, images or samplers), all in descriptor set 0. kp gives each Algorithm its own descriptor
# pool holding exactly one set with exactly its bindings (Algorithm::createParameters; patch 0008's shared
# algorithms allocate their own pool and set the same way), and binds that one set per dispatch, so no
# limit adds up over a sequence: each dispatch's pipeline layout holds one set of n storage buffers, and n
# counts against maxPerStageDescriptorStorageBuffers (Vulkan guarantees 4), maxDescriptorSetStorageBuffers
# (24) and maxPerStageResources (128; compute has no attachments, so the buffers are its only resources)
# alike. Descriptor pools are sized by kp per algorithm and have no device limit besides memory.


def binding_count(v) -> int:
    """Storage buffers a variant binds: its manifest bindings (generated from the template's INTERFACE;
    tests/runtime/test_binding_limits.py checks them against every SPIR-V module's Binding decorations).
    The one place the count comes from."""
    return len(v.bindings)


def max_bindings(info) -> int:
    """The most storage buffers one dispatch may bind on a device (a DeviceInfo): the least of its
    per-stage, per-set and per-stage-resource limits (see above)."""
    return min(info.max_per_stage_descriptor_storage_buffers, info.max_descriptor_set_storage_buffers,
               info.max_per_stage_resources)


def binding_errors(v, limit: int) -> list[str]:
    """Why a variant cannot run under a limit of `limit` storage buffers a dispatch (empty: it can)."""
    n = binding_count(v)
    return [] if n <= limit else [f"{v.name} binds {n} storage buffers, the device allows {limit} a dispatch "
                                  "(maxPerStageDescriptorStorageBuffers, maxDescriptorSetStorageBuffers, "
                                  "maxPerStageResources)"]


def within_binding_limit(cands, limit: int) -> list:
    """The candidates whose bindings fit the device's limit, never one that does not (its pipeline would
    fail to build, or worse). Raises BindingLimitError, naming the kernel with the fewest bindings, its
    count and the limit, where none fits."""
    ok = [v for v in cands if not binding_errors(v, limit)]
    if cands and not ok:
        least = min(cands, key=binding_count)
        raise BindingLimitError(f"no {least.op} kernel fits this device's storage-buffer limit: " +
                                binding_errors(least, limit)[0])
    return ok

