"""Trainer: next-token training of a TransformerLM on text or ids, on the device.

A training step (upload the batch, forward, backward, clip, AdamW, copy the loss to host memory) is
recorded once per shape and trainable set and replayed with one submit per step.
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from .. import ops
from ..autodiff import Tape
from ..errors import EvermindError
from ..runtime import empty, record
from ..runtime.kernels import copy_words
from .data import batches, build_chunks
from .optim import AdamW, clip_grad_norm
from .tokenizer import ByteTokenizer

WSLA_MAX_DELTA = 0.05


class _Step:
    """One recorded training (or evaluation) step for fixed (batch, seq_len, trainable names, clip)."""

    def __init__(self, trainer, B: int, L: int, names: tuple, max_norm: float, track: bool, train: bool):
        self.trainer, self.B, self.L = trainer, B, L
        self.names, self.max_norm, self.track, self.train = names, max_norm, track, train
        dev = trainer.model.device
        self.ids = empty((B * L,), "u32", dev, host_visible=True)
        self.tgt = empty((B * L,), "u32", dev, host_visible=True)
        self.loss_host = empty((1,), "f32", dev, host_visible=True)
        self.norm_host = empty((2,), "f32", dev, host_visible=True)
        self.program = None

    def _build(self):
        t, dev = self.trainer, self.trainer.model.device
        with record(dev) as prog:
            dev.upload(self.ids)
            dev.upload(self.tgt)
            if self.train:
                with Tape() as tape:
                    loss = t.model.loss(self.ids, self.tgt, self.B)
                params = t.model.parameters()
                # Row-range parameters (HybridMambaModel's wInProj_BC under WSLA): name -> (tensor, first row, rows).
                views = t.model.parameter_views() if hasattr(t.model, "parameter_views") else {}
                bases = {views[n][0] if n in views else n for n in self.names}
                grads = tape.backward(loss).by_name({n: params[n] for n in bases})
                grads = {n: (_rows(grads[views[n][0]], *views[n][1:]) if n in views else grads[n]) for n in self.names}
                if self.max_norm > 0 or self.track:
                    metrics = clip_grad_norm(grads, self.max_norm)
                    copy_words(metrics.state, self.norm_host)
                    dev.sync_local(self.norm_host)
                for n in self.names:  # a view steps its own copy of the rows (own moments), copied back after
                    if n in views:
                        base, r0, nr = views[n]
                        if n not in t.optimizer.params:
                            t.optimizer.params[n] = empty((nr, params[base].shape[1]), "f32", dev)
                        _copy_rows(params[base], r0, t.optimizer.params[n], 0, nr)
                t.optimizer.record_updates(grads)
                for n in self.names:
                    if n in views:
                        _copy_rows(t.optimizer.params[n], 0, params[views[n][0]], views[n][1], views[n][2])
            else:
                loss = t.model.loss(self.ids, self.tgt, self.B)
            copy_words(loss, self.loss_host)
            dev.sync_local(self.loss_host)
        self.program = prog

    def run(self, inp: np.ndarray, tgt: np.ndarray):
        self.ids.write_staging(inp)
        self.tgt.write_staging(tgt)
        if self.train:
            self.trainer.optimizer.begin_step()
        if self.program is None:
            self._build()  # records and runs the first step
        else:
            self.program.run()
        loss = float(self.loss_host.read_staging()[0])
        norm = None
        if self.train and (self.max_norm > 0 or self.track):
            norm = math.sqrt(max(float(self.norm_host.read_staging()[0]), 0.0))
        return loss, norm


def _copy_rows(src, r0: int, dst, d0: int, rows: int) -> None:
    cols = src.shape[1]
    ops.copy2d(src, dst, rows, cols, r0 * cols, cols, d0 * cols, cols)


def _rows(t, r0: int, rows: int):
    out = empty((rows, t.shape[1]), t.dtype, t.device)
    _copy_rows(t, r0, out, 0, rows)
    return out


class Trainer:
    def __init__(self, model, tokenizer=None, seed: int = 0):
        self.model = model
        self.tokenizer = tokenizer or ByteTokenizer()
        self.optimizer = AdamW(model.parameters(), lr=1e-3)
        self.seed = seed
        self._steps: dict[tuple, _Step] = {}
        self.history: list[dict] = []  # one entry per step: epoch, step, loss, grad_norm, tokens

    def _ids(self, text_or_ids) -> np.ndarray:
        if isinstance(text_or_ids, str):
            ids = self.tokenizer.encode(text_or_ids)
        else:
            ids = text_or_ids
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu" or (ids.size and (ids.min() < 0 or ids.max() >= self.model.config.vocab_size)):
            raise EvermindError(f"token ids must be integers in [0, {self.model.config.vocab_size})")
        return ids.astype(np.uint32)

    def _step(self, B, L, names, max_norm, track, train) -> _Step:
        key = (B, L, names, float(max_norm), bool(track), train)
        if key not in self._steps:
            self._steps[key] = _Step(self, B, L, names, max_norm, track, train)
        return self._steps[key]

    def train(self, text_or_ids, epochs: int = 1, seq_len: int = 64, batch_size: int = 1, lr: float = 1e-3,
              max_grad_norm: float = 1.0, wsla: bool = False, max_delta: float | None = None,
              track_grad_norm: bool = False, on_epoch_end=None, progress: bool = False,
              time_limit: float | None = None, weight_decay: float = 0.0) -> list[float]:
        """Train; returns the mean loss of each epoch (over all its target tokens).

        wsla trains only model.wsla_parameters() with max_delta defaulting to 0.05 (0 otherwise).
        on_epoch_end(epoch, loss, grad_norm) gets the last step's pre-clip gradient norm when
        track_grad_norm (else None). time_limit stops at the first step boundary past it (seconds).
        """
        if seq_len > self.model.config.max_seq_len:
            raise EvermindError(f"seq_len {seq_len} exceeds the model's max_seq_len {self.model.config.max_seq_len}")
        chunks = build_chunks(self._ids(text_or_ids), seq_len)
        names = tuple(self.model.wsla_parameters()) if wsla else tuple(self.model.parameters())
        opt = self.optimizer
        opt.lr, opt.weight_decay = float(lr), float(weight_decay)
        opt.max_delta = float(max_delta if max_delta is not None else (WSLA_MAX_DELTA if wsla else 0.0))
        step = self._step(batch_size, seq_len, names, max_grad_norm, track_grad_norm, True)
        n_batches = -(-len(chunks) // batch_size)
        losses = []
        t0 = time.perf_counter()
        tokens = 0
        for epoch in range(epochs):
            rng = np.random.default_rng(self.seed + epoch)
            total, count, norm = 0.0, 0, None
            for bi, (inp, tgt, n) in enumerate(batches(chunks, batch_size, seq_len, rng)):
                loss, norm = step.run(inp, tgt)
                if not math.isfinite(loss):
                    raise EvermindError(f"loss became {loss} at epoch {epoch + 1}, step {bi + 1}")
                total += loss * n
                count += n
                tokens += n
                self.history.append({"epoch": epoch + 1, "step": len(self.history) + 1, "loss": loss,
                                     "grad_norm": norm, "tokens": n})
                if progress:
                    _progress(epoch, epochs, bi + 1, n_batches, loss, tokens, time.perf_counter() - t0, time_limit)
                if time_limit is not None and time.perf_counter() - t0 > time_limit:
                    break
            losses.append(total / max(count, 1))
            if on_epoch_end is not None:
                on_epoch_end(epoch + 1, losses[-1], norm if track_grad_norm else None)
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                break
        if progress:
            print(file=sys.stderr)
        return losses

    def evaluate(self, text_or_ids, seq_len: int = 64, batch_size: int = 1) -> float:
        """Perplexity exp(mean next-token loss) over every pair of the text."""
        chunks = build_chunks(self._ids(text_or_ids), seq_len)
        step = self._step(batch_size, seq_len, (), 0.0, False, False)
        total, count = 0.0, 0
        for inp, tgt, n in batches(chunks, batch_size, seq_len):
            loss, _ = step.run(inp, tgt)
            total += loss * n
            count += n
        return math.exp(total / max(count, 1))


def _progress(epoch, epochs, i, n, loss, tokens, elapsed, time_limit=None):
    frac = ((epoch + i / n) / epochs)
    eta = elapsed / frac - elapsed if frac > 0 else 0.0
    if time_limit is not None:
        eta = max(0.0, min(eta, time_limit - elapsed))
    bar = "#" * int(20 * i / n) + "." * (20 - int(20 * i / n))
    sys.stderr.write(f"\repoch {epoch + 1}/{epochs} [{bar}] {i}/{n} loss {loss:.3f} "
                     f"{tokens / max(elapsed, 1e-9):,.0f} tok/s ETA {eta:4.0f}s ")
    sys.stderr.flush()
