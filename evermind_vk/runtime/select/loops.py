"""The loop cap plan: no invocation loops more than MAX_LOOP times.

Mesa's lavapipe (the CPU Vulkan driver) ends every shader loop after 65,535 iterations, silently
(LP_MAX_TGSI_LOOP_ITERATIONS): a one-thread sum of 65,536 ones returns 65,535. Every launch whose
per-invocation loop count grows with the problem is planned so that no invocation loops more than
MAX_LOOP times (16x below that cap, counting all its loops together: lavapipe's cap is on an
invocation's total over all its loops, see matmul.matmul_loop_count): long reductions become two-stage
(colsum), long accumulations become several ordered dispatches (embedding_backward, split-K matmul on
CPU devices), and a launch that still cannot fit is refused (check_loop). GPUs have no such cap; the
reductions are planned the same way there (more parallel), matmul is split only on CPU devices.
"""
from __future__ import annotations

from ...errors import UnsupportedError

MAX_LOOP = 4096

# Loop caps of device types, as the driver enforces them (iterations per invocation, all loops together):
# lavapipe's 65,535; no GPU driver we know of has one. Launches are planned for MAX_LOOP; `dispatch`
# refuses, before recording, any launch whose count (launch.launch_loop_count) could pass the device's cap.
DEVICE_LOOP_CAP = {"cpu": 65535}


class LoopLimitError(UnsupportedError):
    """A launch whose invocations would loop more than MAX_LOOP times."""


def check_loop(what: str, iterations: int) -> None:
    """Refuse a launch whose invocations loop `iterations` times when that exceeds MAX_LOOP."""
    if iterations > MAX_LOOP:
        raise LoopLimitError(f"{what}: {iterations} loop iterations per invocation exceed MAX_LOOP = {MAX_LOOP} "
                             "(lavapipe silently ends loops after 65,535; split the launch)")


def loop_chunks(n: int, limit: int = MAX_LOOP) -> list[tuple[int, int]]:
    """[lo, hi) ranges of at most `limit` covering range(n) in order (at least one, possibly empty)."""
    if limit < 1:
        raise ValueError(f"loop chunk limit {limit} < 1")
    return [(lo, min(lo + limit, n)) for lo in range(0, n, limit)] or [(0, 0)]

