"""Reductions: column sums, and deterministic two-stage sums (stage 1: one partial per CHUNK
elements; stage 2: one workgroup adds the partials in order)."""
from __future__ import annotations


from ..errors import ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.select import bindings, loops
from ..runtime.select import reduce as select_reduce
from ..runtime.knobs import get as knob
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, one_variant, rows_cols, run, want

__all__ = ["colsum", "n_partials", "partial_sums", "final_sum", "reduce_sum", "sum_squares"]

CHUNK = 4096  # elements per stage-1 workgroup


def colsum(x: Tensor, out: Tensor | None = None) -> Tensor:
    """Sum over all rows of x viewed as [rows, last dim], in f32 (bias and norm weight gradients).
    Parallel over columns and row chunks, in stages (runtime.select.reduce.colsum_plan): every thread adds at
    most MAX_LOOP rows in row order, so the result is deterministic and right at any row count.
    out: a tensor of `cols` elements (any shape) to write instead of a new one: f32, or f16 when x is
    f32 (the sums are rounded once, by colsum_cast: the last stage of f16 split-K)."""
    rows, cols = rows_cols(x)
    if out is not None and (out.dtype not in ("f32", "f16") or out.numel != cols):
        raise ShapeError(f"colsum: out is {out.shape}/{out.dtype}, want {cols} f32 (or f16) elements")
    if out is not None and out.dtype == "f16" and x.dtype != "f32":
        raise UnsupportedError(f"colsum into an f16 out reads f32 rows, got {x.dtype}")
    y = empty((cols,), "f32", x.device) if out is None else out
    if cols == 0:
        return y
    src = x
    plan = select_reduce.colsum_plan(rows, cols)
    for i, (n, chunk) in enumerate(plan):
        loops.check_loop("colsum", chunk)
        out_rows = -(-n // chunk)
        dst = y if i == len(plan) - 1 else empty((out_rows, cols), "f32", x.device)
        v = (one_variant("colsum_cast", "f16", x.device) if dst.dtype == "f16"
             else one_variant("colsum", src.dtype, x.device))
        gx = -(-cols // v.spec["WG"])
        if gx > kernels.MAX_GROUPS or out_rows > kernels.MAX_GROUPS:
            raise UnsupportedError(f"colsum of [{rows}, {cols}] needs {gx}x{out_rows} workgroups, "
                                   f"more than {kernels.MAX_GROUPS} per dimension")
        kernels.dispatch(v, [src, dst], dict(rows=n, cols=cols, chunk=chunk), (gx, out_rows, 1))
        src = dst
    return y


def n_partials(numel: int) -> int:
    """Stage-1 partial sums a tensor of numel elements needs."""
    return max(1, -(-numel // CHUNK))


def _stage_variant(op: str, dtype: str, device):
    """The variant of a two-stage sum's or L2 norm's stage on device (runtime.select.reduce.pick_reduce)."""
    return select_reduce.pick_reduce(kernels.usable(op, dtype, device), device.info.type)


def _stage(op: str, dtype: str, tensors: list, push: dict, n_groups: int) -> None:
    kernels.dispatch(_stage_variant(op, dtype, tensors[0].device), tensors, push, kernels.grid(n_groups))


def partial_sums(x: Tensor, part: Tensor, offset: int = 0, square: bool = False) -> int:
    """Stage 1: write one partial sum (of x, or of x^2) per CHUNK elements into part[offset:]; returns the count."""
    n = x.numel
    groups = n_partials(n)
    if offset + groups > part.numel:
        raise ShapeError(f"partials buffer of {part.numel} too small for {offset + groups}")
    _stage("partial_sums", x.dtype, [x, part], dict(n=n, chunk=CHUNK, square=int(square), poff=offset), groups)
    return groups


def final_sum(part: Tensor, n: int, out: Tensor, index: int = 0, accumulate: bool = False,
              divide_by: Tensor | None = None) -> None:
    """Stage 2: out[index] (+)= sum(part[:n]) (then / max(divide_by[0], 1))."""
    wg = _stage_variant("final_sum", "f32", part.device).spec["WG"]
    loops.check_loop("final_sum", select_reduce.final_sum_loops(n, wg))
    _stage("final_sum", "f32", [part, out, divide_by if divide_by is not None else out],
           dict(n=n, oidx=index, accumulate=int(accumulate), use_div=int(divide_by is not None)), 1)


def reduce_sum(x: Tensor, square: bool = False) -> Tensor:
    """sum(x) (or sum(x^2)) as a 1-element f32 tensor, deterministic two-stage reduction."""
    want(x, "x", dtype=FLOATS)
    part = empty((n_partials(x.numel),), "f32", x.device)
    n = partial_sums(x, part, 0, square)
    out = empty((1,), "f32", x.device)
    final_sum(part, n, out)
    return out


def sum_squares(xs: list, out: Tensor, index: int = 0) -> None:
    """out[index] = the sum of squares of every element of every tensor in xs (one vector)."""
    part = empty((sum(n_partials(x.numel) for x in xs),), "f32", out.device)
    off = 0
    for x in xs:
        off += partial_sums(x, part, off, square=True)
    final_sum(part, off, out, index=index)


# -- overflow-free L2 norm (clipping must not overflow on large finite gradients) --------------------
__all__ += ["l2_norm"]


def l2_norm(xs: list, out: Tensor, index: int = 0) -> None:
    """out[index] = the L2 norm of every element of every tensor in xs (one vector), on the device and
    deterministic, never overflowing for finite inputs: m = max |x| first, then m * sqrt(sum (x/m)^2).
    A NaN anywhere gives NaN, an infinity (and no NaN) gives inf."""
    if not xs:
        raise ShapeError("l2_norm: no tensors")
    for x in xs:
        want(x, "x", dtype=FLOATS)
    if out.dtype != "f32" or not 0 <= index < out.numel:
        raise ShapeError(f"l2_norm: out[{index}] of a {out.shape}/{out.dtype} tensor (want f32)")
    part = empty((sum(n_partials(x.numel) for x in xs),), "f32", out.device)
    use_multi = knob("EVERMIND_VK_NORM_MULTI")
    multi = {dt: _multi_variant(dt, out.device) if use_multi else None for dt in {x.dtype for x in xs}}
    batches = _norm_batches(xs, {dt: select_reduce.multi_slots(v.flags) if v else 1 for dt, v in multi.items()})
    for pass_ in (0, 1):
        off = 0
        for batch in batches:
            groups = [n_partials(x.numel) for x in batch]
            if len(batch) == 1:
                x = batch[0]
                _stage("norm_partials", x.dtype, [x, part, out],
                    dict(n=x.numel, chunk=CHUNK, poff=off, oidx=index, pass_=pass_), groups[0])
            else:
                v = multi[batch[0].dtype]
                slots = select_reduce.multi_slots(v.flags)
                push = dict(chunk=CHUNK, poff=off, oidx=index, pass_=pass_)
                g = 0
                for j in range(slots):
                    have = j < len(batch)
                    push[f"n{j}"] = batch[j].numel if have else 0
                    push[f"g{j}"] = g if have else 0xFFFFFFFF
                    g += groups[j] if have else 0
                xt = [batch[j] if j < len(batch) else batch[0] for j in range(slots)]  # unused slots: any tensor
                kernels.dispatch(v, [*xt, part, out], push, kernels.grid(g))
            off += sum(groups)
        _stage("norm_final", "f32", [part, out], dict(n=off, oidx=index, pass_=pass_), 1)


def _multi_variant(dtype: str, device):
    """The norm_partials_multi variant for dtype on device: the one reading the most tensors a dispatch
    that the device's storage-buffer limit allows (runtime.select.reduce.pick_norm_multi), None if none fits."""
    return select_reduce.pick_norm_multi(kernels.with_features("norm_partials_multi", dtype, device),
                                         bindings.max_bindings(device.info), device.info.type)


def _norm_batches(xs: list, group: dict) -> list:
    """xs in order, in runs of up to group[dtype] tensors of one dtype (one norm_partials_multi dispatch
    each: the optimizer's many small gradients cost a few dispatches, not one each; the group size is the
    picked variant's, bounded by the device's binding limit). A group of 1 (EVERMIND_VK_NORM_MULTI=0, or
    no multi variant fits): one norm_partials dispatch a tensor. Either way the partials are the same."""
    out = []
    for x in xs:
        if out and len(out[-1]) < group[x.dtype] and out[-1][0].dtype == x.dtype:
            out[-1].append(x)
        else:
            out.append([x])
    return out
