"""builderforce's trainers on the device (spec §7): EvermindLMTrainer and MoETrainer.

wsla=True trains only the model's wsla_parameters() with the per-element trust region max_delta (default
0.05 under WSLA, else 0 = off), moments kept by name as for the TransformerLM trainer.

Both use evermind_vk.train.AdamW (builderforce's defaults: lr 0.01, betas 0.9/0.999, eps 1e-8, weight
decay 0, no trust region unless max_delta > 0) and run each optimizer step as one recorded program,
replayed with one submit for every later step of the same shape.

EvermindLMTrainer.fit(sequences): per epoch, each sequence of >= 2 tokens contributes its mean
next-token loss over its T - 1 predicted positions and that loss's gradient; every `accum_steps`
sequences (and at the end of the epoch) the summed gradients are divided by the number of sequences
in the window and AdamW steps. Returns the per-epoch mean of the sequence losses. No clipping.

MoETrainer.fit(samples): loss 1/2 |out - target|^2 per sample; per batch (batch_size 0 = all samples)
the summed per-sample gradients plus the load-balance gradient (router only, scale aux_weight E / B)
are all multiplied by 1/B, then AdamW. Like builderforce, the aux gradient is therefore divided by B
twice (aux_divided_twice=True, the default, keeps builderforce's numbers; False divides it once, which
is the gradient of mean task loss + aux_weight x load-balance loss). Returns per epoch
{"loss": sum of sample losses / n, "aux_loss": the last batch's load-balance loss}.
"""
from __future__ import annotations

import numpy as np

from .. import ops
from ..autodiff import Tape
from ..errors import ShapeError
from ..runtime import empty, record
from .optim import AdamW
from .trainer import WSLA_MAX_DELTA

__all__ = ["EvermindLMTrainer", "MoETrainer", "DynamicLossScaler"]

MAX_PROGRAMS = 16  # recorded window shapes kept (sequences of many different lengths would otherwise pile up)


class DynamicLossScaler:
    """builderforce's loss scaler: init 16384, x growth_factor after growth_interval clean steps, x backoff
    on overflow (floor min_scale), no maximum. update(overflow) -> whether the step proceeds."""

    def __init__(self, init_scale: float = 16384.0, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 200, min_scale: float = 1.0):
        self.scale, self.growth_factor, self.backoff_factor = float(init_scale), float(growth_factor), float(backoff_factor)
        self.growth_interval, self.min_scale = int(growth_interval), float(min_scale)
        self.clean_streak = self.overflows = self.skipped = 0

    def update(self, overflow: bool) -> bool:
        """Update the scale after a step: back off on overflow (returns False: skip the step), grow after a
        clean streak (returns True)."""
        if overflow:
            self.overflows += 1
            self.skipped += 1
            self.scale = max(self.min_scale, self.scale * self.backoff_factor)
            self.clean_streak = 0
            return False
        self.clean_streak += 1
        if self.clean_streak >= self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_streak = 0
        return True


class EvermindLMTrainer:
    """builderforce's EvermindLMTrainer: AdamW over next-token cross-entropy per sequence, with gradient
    accumulation, optional checkpointing, mixed precision with a dynamic loss scaler and WSLA."""

    def __init__(self, model, lr: float = 0.01, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 epochs: int = 1, accum_steps: int = 1, max_delta: float | None = None, checkpoint: bool = False,
                 mixed_precision=False, wsla: bool = False):
        self.model, self.epochs, self.accum = model, int(epochs), max(1, int(accum_steps))
        self.names = model.wsla_parameters() if wsla else list(model.parameters())
        max_delta = (WSLA_MAX_DELTA if wsla else 0.0) if max_delta is None else max_delta
        self.checkpoint = bool(checkpoint)
        self.scaler = (DynamicLossScaler(**mixed_precision) if isinstance(mixed_precision, dict)
                       else DynamicLossScaler() if mixed_precision else None)
        self.optimizer = AdamW(model.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                               max_delta=max_delta)
        self._programs: dict[tuple, tuple] = {}
        self.steps = 0

    def _program(self, lengths: tuple):
        """(program or None, ids/targets buffers, losses buffer) for a window of sequences of these lengths."""
        hit = self._programs.get(lengths)
        if hit is None:
            dev = self.model.device
            bufs = [(empty((L,), "u32", dev, host_visible=True), empty((L,), "u32", dev, host_visible=True))
                    for L in lengths]
            losses = empty((len(lengths) + 1,), "f32", dev, host_visible=True)  # + the overflow probe
            hit = [None, bufs, losses, empty((2,), "f32", dev, host_visible=True)]
            if len(self._programs) >= MAX_PROGRAMS:  # each program keeps its step's tensors alive
                self._programs.pop(next(iter(self._programs)))
            self._programs[lengths] = hit
        return hit

    def _record(self, entry):
        _, bufs, losses, scale = entry
        dev = self.model.device
        params = {n: self.model.parameters()[n] for n in self.names}
        with record(dev) as prog:
            acc = None
            for i, (ids, tgt) in enumerate(bufs):
                dev.upload(ids)
                dev.upload(tgt)
                with Tape() as tape:
                    loss = self.model.loss(ids, tgt, checkpoint=self.checkpoint)
                g = tape.backward(loss).by_name(params)
                acc = g if acc is None else {n: ops.add(acc[n], g[n]) for n in acc}
                ops.copy2d(loss, losses, 1, 1, 0, 0, i, 0)
            n = len(bufs)
            if self.scaler is not None:
                # Mixed precision: each sequence's gradient scaled once by the window's scale S (builderforce
                # multiplies the whole accumulated buffer by S after every sequence), averaged, rounded to f16;
                # any non-finite value skips the step; else unscaled by 1/S.
                dev.upload(scale)
                gl = list(acc.values())
                for g in gl:
                    ops.loss_scale_round(g, scale)
                state = empty((1,), "f32", dev)
                ops.sum_squares(gl, state, 0)
                for g in gl:
                    ops.loss_unscale(g, scale, state)
                ops.copy2d(state, losses, 1, 1, 0, 0, n, 0)
            elif n > 1:
                acc = {k: ops.scale(v, 1.0 / n) for k, v in acc.items()}
            self.optimizer.record_updates(acc)
            dev.sync_local(losses)
        entry[0] = prog

    def _window(self, seqs: list) -> list[float]:
        entry = self._program(tuple(len(s) for s in seqs))
        for (ids, tgt), s in zip(entry[1], seqs):
            tok = self.model.check_tokens(s)
            ids.write_staging(tok)
            tgt.write_staging(self.model.next_token_targets(tok))
        if self.scaler is not None:
            S = self.scaler.scale
            entry[3].write_staging(np.array([S / len(seqs), 1.0 / S], np.float32))
        self.optimizer.begin_step()
        if entry[0] is None:
            self._record(entry)  # records and runs the first window of this shape
        else:
            entry[0].run()
        self.steps += 1
        vals = entry[2].read_staging()
        if self.scaler is not None:
            overflow = not np.isfinite(vals[-1])
            if not self.scaler.update(overflow):
                self.optimizer.step_count -= 1  # a skipped step does not advance AdamW's bias correction
        return [float(v) for v in vals[:len(seqs)]]

    def fit(self, sequences) -> list[float]:
        """Train for the configured epochs over sequences of token ids; returns the mean loss of each
        epoch."""
        history = []
        for _ in range(self.epochs):
            total, n, window = 0.0, 0, []
            for seq in sequences:
                if len(seq) < 2:
                    continue
                window.append(list(seq))
                if len(window) >= self.accum:
                    losses = self._window(window)
                    total, n, window = total + sum(losses), n + len(losses), []
            if window:
                losses = self._window(window)
                total, n = total + sum(losses), n + len(losses)
            history.append(total / n if n else 0.0)
        return history


class MoETrainer:
    """builderforce's MoETrainer: AdamW over the MSE of (input, target) pairs plus the weighted load-
    balance loss, in mini-batches."""

    def __init__(self, model, lr: float = 0.01, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 aux_weight: float = 0.01, batch_size: int = 0, epochs: int = 1, aux_divided_twice: bool = True,
                 max_delta: float | None = None, wsla: bool = False):
        self.names = model.wsla_parameters() if wsla else list(model.parameters())
        max_delta = (WSLA_MAX_DELTA if wsla else 0.0) if max_delta is None else max_delta
        self.model, self.aux_weight, self.batch_size, self.epochs = model, float(aux_weight), int(batch_size), int(epochs)
        self.aux_divided_twice = bool(aux_divided_twice)
        self.optimizer = AdamW(model.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                               max_delta=max_delta)
        self._programs: dict[int, list] = {}

    def _record(self, entry, B: int):
        _, x, t, out_host = entry
        m, dev = self.model, self.model.device
        E = m.config.num_experts
        aux_scale = self.aux_weight * E / (B if self.aux_divided_twice else 1)
        params = {n: m.parameters()[n] for n in self.names}
        with record(dev) as prog:
            dev.upload(x)
            dev.upload(t)
            with Tape() as tape:
                out, ctx, aux = m.forward(x, aux_scale=aux_scale)
            dout = ops.add(out, ops.scale(t, -1.0))
            grads = tape.backward({out: dout}).by_name(params)
            grads = {k: ops.scale(g, 1.0 / B) for k, g in grads.items()}
            self.optimizer.record_updates(grads)
            if aux is None:  # aux_weight 0: the load-balance loss is still reported
                aux = ops.moe_load_stats(ctx)[1]
            sq = ops.reduce_sum(dout, square=True)
            ops.copy2d(sq, out_host, 1, 1, 0, 0, 0, 0)
            ops.copy2d(aux, out_host, 1, 1, 0, 0, 1, 0)
            dev.sync_local(out_host)
        entry[0] = prog

    def fit(self, samples) -> list[dict]:
        """Train for the configured epochs over (input, target) pairs; returns per epoch a dict of the mean
        loss and the aux loss."""
        X = np.asarray([np.asarray(s[0], np.float32) for s in samples], np.float32)
        T = np.asarray([np.asarray(s[1], np.float32) for s in samples], np.float32)
        d = self.model.config.model_dim
        if X.ndim != 2 or X.shape[1] != d or T.shape != X.shape:
            raise ShapeError(f"MoETrainer: samples must be (input [{d}], target [{d}]) pairs")
        bs = self.batch_size if self.batch_size > 0 else len(X)
        dev = self.model.device
        history = []
        for _ in range(self.epochs):
            total, aux = 0.0, 0.0
            for lo in range(0, len(X), bs):
                xb, tb = X[lo:lo + bs], T[lo:lo + bs]
                B = len(xb)
                entry = self._programs.get(B)
                if entry is None:
                    entry = [None, empty((B, d), "f32", dev, host_visible=True),
                             empty((B, d), "f32", dev, host_visible=True), empty((2,), "f32", dev, host_visible=True)]
                    self._programs[B] = entry
                entry[1].write_staging(xb)
                entry[2].write_staging(tb)
                self.optimizer.begin_step()
                if entry[0] is None:
                    self._record(entry, B)
                else:
                    entry[0].run()
                sq, aux = (float(v) for v in entry[3].read_staging())
                total += 0.5 * sq
            history.append({"loss": total / max(1, len(X)), "aux_loss": aux})
        return history
