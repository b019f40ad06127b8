"""Recurrent decoding's pieces that EvermindLM and HybridMambaModel share: the causal conv from each sequence's
window (its last K-1 conv inputs; new tokens are convolved against it, the window advancing in place) and the
last row of each sequence's S new tokens."""
from __future__ import annotations

from .. import ops
from ..runtime import Tensor, empty


def conv_window_step(win: Tensor | None, rows: Tensor, w: Tensor, b: Tensor | None, K: int, first: int = 0,
                     S: int = 1) -> Tensor:
    """S new conv inputs of each of n sequences (rows [n*S, C], sequence-major) through the causal conv of K
    taps (weight w [C, K], bias b or None) whose windows (each sequence's previous K-1 inputs, oldest first)
    are windows first..first+n-1 of win [slots*(K-1), C] (None when K is 1). Each window and its rows are
    stacked into a segment of K-1+S rows and the segments convolved with the forward's kernel (no tap crosses
    a segment); returns each segment's last S rows [n*S, C], and each window becomes its segment's last K-1
    rows."""
    C = rows.shape[1]
    n = rows.shape[0] // S
    if win is None:
        return ops.conv1d_causal(rows, w, b, seq_len=S)
    W, T = (K - 1) * C, (K - 1 + S) * C  # one window's elements, one segment's
    full = empty((n * (K - 1 + S), C), rows.dtype, rows.device)
    ops.copy2d(win, full, n, W, first * W, W, 0, T)
    ops.copy2d(rows, full, n, S * C, 0, S * C, W, T)
    y = ops.conv1d_causal(full, w, b, seq_len=K - 1 + S)
    ops.copy2d(full, win, n, W, S * C, T, first * W, W)
    out = empty((n * S, C), y.dtype, y.device)
    ops.copy2d(y, out, n, S * C, W, T, 0, S * C)
    return out


def last_rows(x: Tensor, S: int) -> Tensor:
    """The last of each sequence's S rows of x [n*S, d] (sequence-major): [n, d]; x itself when S is 1."""
    if S == 1:
        return x
    n, d = x.shape[0] // S, x.shape[1]
    out = empty((n, d), x.dtype, x.device)
    ops.copy2d(x, out, n, d, (S - 1) * d, S * d, 0, d)
    return out
