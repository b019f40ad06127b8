"""Small helpers shared by the ops: variant lookup, output allocation, checks."""
from __future__ import annotations

from ..errors import ShapeError, UnsupportedError

from ..runtime import kernels, knobs, variants
from ..runtime.tensor import Tensor, empty

FLOATS = ("f32", "f16")


def one_variant(op: str, dtype: str, device, flag: str | None = None):
    """The (single) usable variant of op for dtype on device (with `flag` among its flags, if given)."""
    cands = kernels.usable(op, dtype, device)
    if flag is not None:
        cands = [v for v in cands if flag in v.flags]
        if not cands:
            raise UnsupportedError(f"no {op} kernel with {flag} for dtype {dtype}")
    return cands[0]


def run(op: str, dtype: str, tensors: list, push: dict, n_groups: int, flag: str | None = None) -> None:
    """Dispatch op's variant over a 1-D count of workgroups."""
    v = one_variant(op, dtype, tensors[0].device, flag)
    kernels.dispatch(v, tensors, push, kernels.grid(n_groups))


def per_thread(op: str, dtype: str, tensors: list, push: dict, n_threads: int, flag: str | None = None) -> None:
    """Dispatch op with one thread per element of n_threads (WG threads a workgroup)."""
    v = one_variant(op, dtype, tensors[0].device, flag)
    kernels.dispatch(v, tensors, push, kernels.grid(-(-max(1, n_threads) // v.spec["WG"])))


def _forced_count(env: str, what: str) -> int:
    """The count an environment variable forces (0: unset)."""
    return knobs.get(env)


def run_rows(op: str, dtype: str, tensors: list, push: dict, rows: int, cols: int) -> None:
    """A one-workgroup-per-row kernel (rms_norm, cross_entropy and their backwards) over `rows` rows of
    `cols`, its workgroup size picked by runtime.variants.pick_row_wg (EVERMIND_VK_ROW_WG forces one)."""
    dev = tensors[0].device
    v = variants.pick_row_wg(kernels.usable(op, dtype, dev), cols, dev.info.type,
                             _forced_count("EVERMIND_VK_ROW_WG", "a workgroup size"))
    kernels.dispatch(v, tensors, push, kernels.grid(rows))


def run_softmax(op: str, tensors: list, push: dict, rows: int, cols: int) -> None:
    """softmax or softmax_backward over `rows` rows of `cols`, ROWS rows a workgroup as
    runtime.variants.pick_softmax picks (EVERMIND_VK_SOFTMAX_ROWS forces a count)."""
    dev = tensors[0].device
    v = variants.pick_softmax(kernels.usable(op, tensors[0].dtype, dev), cols, dev.info.type,
                              _forced_count("EVERMIND_VK_SOFTMAX_ROWS", "a number of rows"))
    kernels.dispatch(v, tensors, push, kernels.grid(-(-rows // v.spec["ROWS"])))


def like(t: Tensor, shape=None, dtype=None) -> Tensor:
    return empty(t.shape if shape is None else shape, t.dtype if dtype is None else dtype, t.device)


def want(t: Tensor, name: str, *, ndim=None, shape=None, dtype=None) -> None:
    if ndim is not None and t.ndim != ndim:
        raise ShapeError(f"{name} must be {ndim}-D, got shape {t.shape}")
    if shape is not None and t.shape != tuple(shape):
        raise ShapeError(f"{name} has shape {t.shape}, want {tuple(shape)}")
    if dtype is not None and t.dtype not in ((dtype,) if isinstance(dtype, str) else dtype):
        raise UnsupportedError(f"{name} has dtype {t.dtype}, want {dtype}")


def rows_cols(t: Tensor) -> tuple[int, int]:
    """View t as [rows, last dim]."""
    if t.ndim == 0:
        raise ShapeError("a 0-d tensor has no rows")
    cols = t.shape[-1]
    return (t.numel // cols if cols else 0), cols
