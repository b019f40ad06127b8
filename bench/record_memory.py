#!/usr/bin/env python3
"""Peak device memory of one recorded training step, with the recording's buffer reuse on and off
(EVERMIND_VK_DISABLE_RECORD_REUSE), and who holds the memory at the peak.

    python bench/record_memory.py                     # the small default config (lavapipe)
    python bench/record_memory.py --config tiny       # d128, 4 layers, batch 8 x 128 (mid: d256, 4 layers)
    python bench/record_memory.py --config 23.7m      # d512, 8 layers, 8/4 heads, ff 1408, batch 16 x 256
    python bench/record_memory.py --precision f16
    python bench/record_memory.py --checkpoint        # with activation checkpointing (every layer; --checkpoint K:
                                                      # every K-th), beside the same step without it

A recording plans its buffers by lifetime when it ends (EVERMIND_VK_DISABLE_RECORD_PLAN=1: placed as it
allocates, best fit among dead tensors' buffers); with the plan nothing is allocated while it records, so
the holder table's "allocated then" is the weights and AdamW moments alone.

Per mode it trains two steps of a TransformerLM through `Trainer.train` (the first records the step) and
prints: the bytes held before (weights), the peak of Device.max_memory_allocated over the two steps, what
stays allocated after them (weights, AdamW moments, the recorded program's buffers), how many allocations
of the recording a freed buffer served, the losses (identical with reuse on and off), and, at the moment
the tensors allocated during training (weights not included, AdamW moments included) held the most bytes
at once, those tensors grouped by the op that allocated them ("fwd"/"bwd": inside the forward or the
tape's backward walk) beside the free pool (buffers of dead tensors waiting for an allocation of their
size). With reuse the peak is about the weights plus that most-held plus what no later allocation fit.
With --checkpoint K the modes are: reuse on and off with activation checkpointing (every K-th layer
recomputed in the backward: Trainer(checkpoint_layers=K)), then reuse on without it, the baseline of
"peak with checkpointing / without" (the losses of all three identical).
No PyTorch here: bench/train_bench.py prints our peak against
torch.cuda.max_memory_allocated in the same run.
"""
import argparse
import collections
import gc
import os
import sys
import traceback
import weakref

import numpy as np

import evermind_vk as ev
from evermind_vk.models import LMConfig, TransformerLM
import importlib
from evermind_vk.train import Trainer

rt_tensor = importlib.import_module("evermind_vk.runtime.tensor")

CONFIGS = {  # name: (d_model, layers, heads, kv_heads, d_ff, batch, seq_len[, vocab]) (train_bench's 124m and 350m)
    "small": (64, 2, 4, 2, 128, 8, 64),
    "tiny": (128, 4, 4, 2, 352, 8, 128),
    "mid": (256, 4, 8, 4, 704, 8, 128),
    "23.7m": (512, 8, 8, 4, 1408, 16, 256),
    "124m": (768, 12, 12, 4, 3072, 8, 1024, 49152),
    "350m": (1024, 24, 16, 8, 4096, 4, 1024, 49152),
}
PKG = os.path.dirname(ev.__file__)


def _origin() -> str:
    """'fwd'/'bwd', the model (or trainer) line and the innermost op function allocating now."""
    frames = traceback.extract_stack()[:-3]
    phase = "bwd" if any(f.name == "backward" and f.filename.endswith("tape.py") for f in frames) else "fwd"
    outer = inner = None
    for f in frames:
        rel = os.path.relpath(f.filename, PKG)
        if rel.startswith(("models" + os.sep, "train" + os.sep)):
            outer = f"{rel.split(os.sep)[-1][:-3]}:{f.lineno}"
        if rel.startswith("ops" + os.sep) and not rel.endswith("_util.py"):
            inner = f"{rel.split(os.sep)[-1][:-3]}.{f.name}"
    return f"{phase} {outer} {inner}"


class Tracker:
    """Wraps the runtime's allocation: notes each tensor's origin and, at every new peak, who holds what."""

    def __init__(self, dev):
        self.dev, self.live, self.best, self.snapshot = dev, weakref.WeakKeyDictionary(), -1, None
        self._orig = rt_tensor._new

    def __enter__(self):
        def new(*a, **kw):
            t = self._orig(*a, **kw)
            self.live[t] = (_origin(), t._buffer.nbytes)
            held = list(self.live.values())
            now = sum(nbytes for _, nbytes in held)
            if now > self.best:  # the most bytes live tensors have held at once
                self.best = now
                by = collections.Counter()
                for origin, nbytes in held:
                    by[origin] += nbytes
                prog = self.dev.recording
                pool = sum(b.nbytes for bufs in (prog._free.values() if prog is not None else ()) for b in bufs)
                self.snapshot = (self.dev.memory_allocated(), by, pool)
            return t
        rt_tensor._new = new
        return self

    def __exit__(self, *exc):
        rt_tensor._new = self._orig


def run(cfg, B, L, precision, reuse: bool, top: int, record_only: bool = False, checkpoint: int = 0):
    os.environ["EVERMIND_VK_DISABLE_RECORD_REUSE"] = "0" if reuse else "1"
    dev = ev.get_device()
    gc.collect()
    model = TransformerLM(cfg, device=dev)
    tr = Trainer(model, precision=precision, checkpoint_layers=checkpoint)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, B * L * (1 if record_only else 2) + 1)
    gc.collect()
    base = dev.memory_allocated()
    dev.reset_peak_memory_stats()
    with Tracker(dev) as tk:
        tr.train(ids, seq_len=L, batch_size=B, lr=1e-3)
    gc.collect()
    peak, after = dev.max_memory_allocated(), dev.memory_allocated()
    prog = tr.step_program(L, B)
    losses = [h["loss"] for h in tr.history]
    mode = f"reuse {'on ' if reuse else 'off'}" + ("" if not checkpoint else f", checkpoint {checkpoint}")
    print(f"{mode}: weights {base / 2**20:8.2f} MiB   peak {peak / 2**20:8.2f} MiB   "
          f"held after {after / 2**20:8.2f} MiB   reused allocations {prog.buffers_reused}   "
          f"dispatches {len(prog)}   barriers {prog.barrier_plan.barriers}   "
          + (f"planned {prog.planned_bytes / 2**20:.2f} MiB   " if prog.planned_bytes else "")
          + f"losses {'not run' if record_only else losses}", flush=True)
    if top and tk.snapshot is not None:
        now, by, pool = tk.snapshot
        tracked = sum(by.values())
        rows = by.most_common(top)
        if prog.planned_bytes:  # nothing of the recording is allocated before it ends
            print(f"  when live tensors held the most: {tracked / 2**20:.2f} MiB (the plan's buffers: "
                  f"{prog.planned_bytes / max(tracked, 1):.3f}x that); live tensors by the op that made them:")
        else:
            print(f"  when live tensors held the most (allocated then {now / 2**20:.2f} MiB): live tensors "
                  f"{tracked / 2**20:.2f} MiB, free pool {pool / 2**20:.2f} MiB, dead tensors' buffers the program "
                  f"keeps and weights {(now - tracked - pool) / 2**20:.2f} MiB; live tensors by the op that made them:")
        for origin, nbytes in rows:
            print(f"    {nbytes / 2**20:8.2f} MiB  {origin}")
    del tr, model, prog
    gc.collect()
    return peak, losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="small")
    ap.add_argument("--precision", choices=("f32", "f16"), default="f32")
    ap.add_argument("--checkpoint", type=int, nargs="?", const=1, default=0, metavar="K",
                    help="activation checkpointing: every K-th layer recomputed in the backward (alone: every layer)")
    ap.add_argument("--layers", type=int, default=0, help="override the config's layer count (0: the config's)")
    ap.add_argument("--reuse-only", action="store_true",
                    help="skip the mode without reuse (its peak is the sum of every allocation: the 350m config's"
                         " is several times the reuse peak)")
    ap.add_argument("--top", type=int, default=12, help="rows of the holder table (0: none)")
    ap.add_argument("--record-only", action="store_true",
                    help="record one step and never submit it (memory accounting is host-side, so the numbers hold; "
                         "no losses): the 23.7m config in seconds on lavapipe, with lavapipe's kernel choices")
    ap.add_argument("--as-gpu", action="store_true",
                    help="with --record-only: let selection pick as on a discrete GPU with 32-wide subgroups and 48 KiB"
                         " "
                         "of shared memory (an H200's choices: the matmul attention path, split-K, GPU tiles)")
    a = ap.parse_args(argv)
    if a.as_gpu:
        if not a.record_only:
            ap.error("--as-gpu needs --record-only (the GPU kernels are not meant to run here)")
        import dataclasses
        dev = ev.get_device()
        dev.info = dataclasses.replace(dev.info, type="discrete_gpu", subgroup_size=32, shared_memory=49152,
                                       max_storage_buffer_range=1 << 32,
                                       features=dict(dev.info.features, subgroup_size_32=True))
    if a.record_only:
        from evermind_vk.runtime import Program
        Program.run = lambda self: None
    d, n_layers, H, KVH, ff, B, L, *vocab = CONFIGS[a.config]
    n_layers = a.layers or n_layers
    cfg = LMConfig(d_model=d, n_layers=n_layers, n_heads=H, n_kv_heads=KVH, d_ff=ff, max_seq_len=L,
                   **({"vocab_size": vocab[0]} if vocab else {}))
    ck = f", activation checkpointing every {a.checkpoint} layer(s)" if a.checkpoint else ""
    print(f"config {a.config} ({d=}, {n_layers} layers, {H}/{KVH} heads, ff {ff}, batch {B} x {L}), {a.precision}{ck}, "
          f"on {ev.get_device().info.name}", flush=True)
    on, l_on = run(cfg, B, L, a.precision, True, a.top, a.record_only, a.checkpoint)
    if a.reuse_only:
        return 0
    off, l_off = run(cfg, B, L, a.precision, False, a.top, a.record_only, a.checkpoint)
    same = "not run (--record-only)" if a.record_only else l_on == l_off
    print(f"peak with reuse / without: {on / off:.3f}; losses identical: {same}")
    if not a.checkpoint:
        return 0 if l_on == l_off else 1
    plain, l_plain = run(cfg, B, L, a.precision, True, a.top, a.record_only)
    same = "not run (--record-only)" if a.record_only else l_on == l_plain
    print(f"peak with checkpointing / without (reuse on): {on / plain:.3f}; losses identical: {same}")
    return 0 if l_on == l_off == l_plain else 1


if __name__ == "__main__":
    sys.exit(main())
