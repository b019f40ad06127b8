"""The generated kernel set: generated/manifest.json and its SPIR-V, and which variants a device can run."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from ..errors import KernelError, UnsupportedError
from .select import bindings, features

SCHEMA = "evermind-vk.kernels/1"
MAX_GROUPS = 65535  # the minimum maxComputeWorkGroupCount every Vulkan device supports


@dataclass(frozen=True)
class Variant:
    """One generated kernel variant, as the manifest describes it."""
    name: str
    op: str
    dtype: str
    module: str
    spirv: str
    spec_constants: tuple  # ((name, value), ...) in constant_id order
    bindings: tuple  # ((name, type, access), ...) in binding order
    push_constants: tuple  # ((name, type), ...)
    features: tuple
    flags: tuple = ()

    @property
    def spec(self) -> dict:
        """The specialization constants by name."""
        return dict(self.spec_constants)


def _files():
    return resources.files("evermind_vk.generated")


@functools.lru_cache(maxsize=1)
def manifest() -> dict[str, Variant]:
    """All variants by name. Raises KernelError if the manifest is missing or of another schema."""
    try:
        data = json.loads((_files() / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError) as e:
        raise KernelError(f"generated/manifest.json unreadable ({e}); run `python tools/codegen.py`") from e
    if data.get("schema") != SCHEMA:
        raise KernelError(f"generated/manifest.json has schema {data.get('schema')!r}, this runtime reads {SCHEMA!r}")
    out = {}
    for v in data["variants"]:
        out[v["name"]] = Variant(
            name=v["name"], op=v["op"], dtype=v["dtype"], module=v["module"], spirv=v["spirv"],
            spec_constants=tuple((n, int(x)) for n, x in v["spec_constants"]),
            bindings=tuple((b["name"], b["type"], b["access"]) for b in v["bindings"]),
            push_constants=tuple((p["name"], p["type"]) for p in v["push_constants"]),
            features=tuple(v["features"]), flags=tuple(v.get("flags", ())))
    return out


def variants_of(op: str, dtype: str) -> list[Variant]:
    """Every variant of (op, dtype), in manifest order."""
    return [v for v in manifest().values() if v.op == op and v.dtype == dtype]


def usable(op: str, dtype: str, device) -> list[Variant]:
    """Variants of (op, dtype) the device can run: it has their features and their storage buffers fit its
    binding limit (select.bindings.within_binding_limit). Raises UnsupportedError if no variant has the
    features, BindingLimitError if none of those fits the limit."""
    return bindings.within_binding_limit(with_features(op, dtype, device), bindings.max_bindings(device.info))


def run_errors(variant: Variant, device) -> list[str]:
    """Why `device` cannot run `variant` (empty: it can): the features it lacks or has switched off, then the
    device rules of select.features.device_errors (a cm2 tile against the device's flexible shapes)."""
    missing = [f for f in variant.features if not device.has(f)]
    lacks = [f"{variant.name} needs {', '.join(missing)}, which {device.info.name} lacks"] if missing else []
    return lacks + features.device_errors(variant, device.info)


def with_features(op: str, dtype: str, device) -> list[Variant]:
    """Variants of (op, dtype) whose features the device has, whatever they bind (for selectors that
    apply the binding limit themselves: fused attention, norm_partials_multi). Raises UnsupportedError if none."""
    cands = variants_of(op, dtype)
    if not cands:
        have = sorted({v.dtype for v in manifest().values() if v.op == op})
        raise UnsupportedError(f"no {op} kernel for dtype {dtype}" + (f" (have: {', '.join(have)})" if have else ""))
    ok = [v for v in cands if not run_errors(v, device)]
    if not ok:
        need = sorted({f for v in cands for f in v.features if not device.has(f)})
        raise UnsupportedError(f"{op} in {dtype} needs device feature(s) {', '.join(need)}, "
                               f"which {device.info.name} lacks or has switched off")
    return ok


@functools.lru_cache(maxsize=None)
def spirv(module_path: str) -> bytes:
    """A module's SPIR-V bytes."""
    try:
        return (_files() / module_path).read_bytes()
    except FileNotFoundError as e:
        raise KernelError(f"generated/{module_path} missing; run `python tools/codegen.py`") from e


def grid(n_groups: int) -> tuple[int, int, int]:
    """A 1-D count of workgroups as (x, y, 1) with x, y <= 65535 (kernels linearise y*nx + x)."""
    if n_groups <= MAX_GROUPS:
        return (max(1, n_groups), 1, 1)
    y = -(-n_groups // MAX_GROUPS)
    if y > MAX_GROUPS:
        raise UnsupportedError(f"{n_groups} workgroups exceed one dispatch")
    return (MAX_GROUPS, y, 1)
