"""float64 oracles and tolerances shared by the kernel tests."""
import numpy as np

U32 = 2.0 ** -24  # unit roundoff of f32
U16 = 2.0 ** -11  # unit roundoff of f16
TINY32 = 2.0 ** -126  # smallest normal f32: Vulkan devices may flush subnormals to zero
TINY16 = 2.0 ** -14  # smallest normal f16


def rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """The values the kernel actually sees: x rounded to dtype (round-to-nearest-even), as float64."""
    return x.astype(np.float16 if dtype == "f16" else np.float32).astype(np.float64)


def gamma(n: int, u: float = U32) -> float:
    """Higham's gamma_n = n u / (1 - n u): the relative error bound of an n-term f32 dot product."""
    return n * u / (1 - n * u)


def dot_bound(a_abs: np.ndarray, b_abs: np.ndarray, k: int, out_dtype: str) -> np.ndarray:
    """Elementwise bound on |fl(A.B) - A.B| for f32 accumulation over k terms (x2 margin), plus the
    final rounding to the output dtype."""
    mag = a_abs @ b_abs
    bound = 2 * gamma(k + 2) * mag
    if out_dtype == "f16":
        bound = bound + U16 * mag + 2.0 ** -24  # f16 output rounding (and its subnormal spacing)
    return bound + 4 * TINY32


def assert_within(got: np.ndarray, want: np.ndarray, bound, what: str = "") -> None:
    got = got.astype(np.float64)
    err = np.abs(got - want)
    bad = ~(err <= bound)
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err - bound, -np.inf)), err.shape)
        raise AssertionError(f"{what}: {bad.sum()} of {err.size} elements off; worst at {i}: "
                             f"got {got[i]!r}, want {want[i]!r}, bound {np.broadcast_to(bound, err.shape)[i]!r}")


def embedded_rows(rng, x: np.ndarray, table: np.ndarray | None, embed: bool):
    """A fused decode kernel's layer-0 input (x [R, d] f32): with `embed`, R ids drawn from 0..V+1 (ids >= V
    look up zero rows), the float64 rows of `table` [V, d] they look up, and x filled with NaN (the kernel must
    not read it); else x itself. Returns (x, the float64 input rows, ids or None)."""
    if not embed:
        return x, x.astype(np.float64), None
    V = table.shape[0]
    ids = rng.integers(0, V + 2, x.shape[0]).astype(np.uint32)
    return np.full_like(x, np.nan), np.where((ids < V)[:, None], table[np.minimum(ids, V - 1)], 0.0), ids


def dressed_as(device, device_type: str):
    """The local device dressed as another device type ("cpu", "discrete"): what selection reads of a device
    (its info and features), so a rule's choices for that type are checked whatever device runs the suite."""
    import dataclasses
    import types
    return types.SimpleNamespace(info=dataclasses.replace(device.info, type=device_type), has=device.has)


def gpu_like(device):
    return dressed_as(device, "discrete")


def cpu_like(device):
    return dressed_as(device, "cpu")
