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


# ---- the fused decode kernels' oracle tests (decode_layer, mamba1_decode, hybrid_attn_decode, evermind_layer) ----
def rms(x, w, eps):
    """One row's RMSNorm in float64: x / sqrt(mean(x^2) + eps) * w."""
    return x / np.sqrt(np.mean(x * x) + eps) * w


def assert_final(got_y, got_l, want_x, wf, table, final: str, eps: float, tol: float) -> None:
    """A fused last layer's outputs: with final "no" none; else y = rms(x, wf) of the oracle's rows, and with
    final "head" also the tied head's logits y table^T, each within tol of its magnitude."""
    if final == "no":
        assert got_y is None
        return
    want_y = np.stack([rms(r, wf.astype(np.float64), eps) for r in want_x])
    assert_within(got_y, want_y, tol * (np.abs(want_y) + np.abs(want_y).max()) + 1e-30, "y")
    if final == "head":
        want_l = want_y @ table.T.astype(np.float64)
        assert_within(got_l, want_l, tol * (np.abs(want_l) + np.abs(want_l).max()) + 1e-30, "logits")


def assert_kv_caches(got_k, got_v, kc, vc, kc0, vc0, items, tol: float) -> None:
    """A fused attention layer's caches: the oracle's (kc, vc) within tol, and every (slot, position) no item
    wrote left exactly as it was (kc0, vc0; items: hyper_words' (position, slot, ...) tuples)."""
    assert_within(got_k, kc, tol * (np.abs(kc) + 1), "k cache")
    assert_within(got_v, vc, tol * (np.abs(vc) + 1), "v cache")
    touched = np.zeros(kc0.shape[:2], bool)
    for pos, slot, _, _ in items:
        touched[slot, pos] = True
    assert np.array_equal(got_k[~touched], kc0[~touched]) and np.array_equal(got_v[~touched], vc0[~touched])
