"""The Trainer's recorded programs: one per (batch shape, trainable set, group assignment, clip, kind),
recorded on first use and replayed with one submit per step.

kind: 'train' (forward, backward, clip, AdamW), 'eval' (forward only), 'micro' (forward, backward with
the seed read from a device buffer, gradients added into the trainer's accumulation buffers) or 'apply'
(clip and AdamW on the accumulation buffers, then zero them; no batch). The batch's device inputs are the
model's batch_inputs (models.protocol); the loss is its batch_loss."""
from __future__ import annotations

import math

import numpy as np

from .. import ops
from ..autodiff import Tape
from ..runtime import empty, record
from ..runtime.kernels import copy_words, fill_words
from .optim import clip_grad_norm, unscale_grads


def copy_rows(src, r0: int, dst, d0: int, rows: int) -> None:
    """dst[d0:d0+rows] = src[r0:r0+rows] for 2-D tensors of the same width."""
    cols = src.shape[1]
    ops.copy2d(src, dst, rows, cols, r0 * cols, cols, d0 * cols, cols)


def take_rows(t, r0: int, rows: int):
    """A new tensor holding rows r0 .. r0+rows-1 of t."""
    out = empty((rows, t.shape[1]), t.dtype, t.device)
    copy_rows(t, r0, out, 0, rows)
    return out


class RecordedStep:
    """One recorded program for fixed (batch, seq_len, trainable names, group assignment, clip, kind).
    grad_scale: the batch's gradient weight, fixed at record time, for models whose batch_loss adds
    gradient terms outside the loss (models.protocol: records_grad_scale); None for the others."""

    def __init__(self, trainer, B: int, L: int, names: tuple, max_norm: float, track: bool, kind: str,
                 grad_scale: float | None = None):
        self.trainer, self.B, self.L = trainer, B, L
        self.names, self.max_norm, self.track, self.kind = names, max_norm, track, kind
        self.grad_scale = grad_scale
        dev = trainer.model.device
        self.inputs = {}
        if kind != "apply":
            self.inputs = {n: empty(shape, dtype, dev, host_visible=True)
                           for n, (shape, dtype) in trainer.model.batch_inputs(B, L).items()}
        if kind == "micro" or (kind == "train" and trainer.scaler is not None):
            self.seed = empty((1,), "f32", dev, host_visible=True)  # d(loss) seed: micro weight x loss scale
        if trainer.scaler is not None and kind in ("train", "apply"):
            self.overflow_host = empty((2,), "f32", dev, host_visible=True)  # [norm of the scaled gradients, -]
        self.loss_host = empty((1,), "f32", dev, host_visible=True)
        self.norm_host = empty((2,), "f32", dev, host_visible=True)
        self.extras_host = None
        self.extra_names: list[str] = []
        self.program = None

    @property
    def updates(self) -> bool:
        """Whether this program steps the optimizer."""
        return self.kind in ("train", "apply")

    def _clip_and_update(self, grads):
        t, dev = self.trainer, self.trainer.model.device
        norm = unscale = None
        if t.scaler is not None:  # loss scaling: overflow check; AdamW unscales (on overflow: skips all)
            if t.grad_precision == "f16":  # builderforce's mixed precision: the scaled gradients rounded to f16
                dev.upload(t._ones_buf)
                for g in {id(g): g for g in grads.values()}.values():
                    ops.loss_scale_round(g, t._ones_buf)
            dev.upload(t._scale_buf)
            state, norm = unscale_grads(grads, t._scale_buf, in_place=False)
            unscale = (t._scale_buf, state)
            copy_words(state, self.overflow_host)
            dev.sync_local(self.overflow_host)
        metrics = None
        if self.max_norm > 0 or self.track:  # the norm only; the updates below apply the clipping scale
            metrics = clip_grad_norm(grads, self.max_norm, norm=norm, defer=True)
            copy_words(metrics.state, self.norm_host)
            dev.sync_local(self.norm_host)
        t.optimizer.record_updates(grads if t._dp is None else t._dp.owned(grads), clip=metrics,  # ZeRO: this rank's share
                                   unscale=unscale)

    def _update_with_views(self, grads, params, views):
        """Clip and step; a row-range parameter (HybridMambaModel's wInProj_BC under WSLA: name -> (base,
        first row, rows)) steps its own copy of the rows (own moments), copied from and back into its base."""
        t, dev = self.trainer, self.trainer.model.device
        for n in self.names:
            if n in views:
                base, r0, nr = views[n]
                if n not in t.optimizer.params:
                    t.optimizer.params[n] = empty((nr, params[base].shape[1]), "f32", dev)
                copy_rows(params[base], r0, t.optimizer.params[n], 0, nr)
        self._clip_and_update(grads)
        for n in self.names:
            if n in views:
                copy_rows(t.optimizer.params[n], 0, params[views[n][0]], views[n][1], views[n][2])

    def _record_extras(self, extras: dict, dev) -> None:
        """Copy the batch's named extra scalars (e.g. the MoE load-balance loss) to host memory."""
        if not extras:
            return
        self.extra_names = sorted(extras)
        self.extras_host = empty((len(extras),), "f32", dev, host_visible=True)
        for i, k in enumerate(self.extra_names):
            ops.copy2d(extras[k], self.extras_host, 1, 1, 0, 0, i, 0)
        dev.sync_local(self.extras_host)

    def _record_apply(self, params, views):
        t, dev = self.trainer, self.trainer.model.device
        acc = {n: t._acc[n] for n in self.names}
        if t._dp is not None:  # data-parallel: the all-reduced gradients, written on the host
            for g in acc.values():
                dev.upload(g)
        self._update_with_views(acc, params, views)
        for g in acc.values():
            fill_words(g, 0)

    def _record_batch(self, params, views):
        t, dev = self.trainer, self.trainer.model.device
        for buf in self.inputs.values():
            dev.upload(buf)
        if self.kind == "eval":
            loss, extras = t._loss(self.inputs, self.B, self.L, 1.0)
        else:
            with Tape() as tape:
                loss, extras = t._loss(self.inputs, self.B, self.L, 1.0 if self.grad_scale is None else self.grad_scale)
            bases = {views[n][0] if n in views else n for n in self.names}
            seed = loss
            if self.kind == "micro" or t.scaler is not None:  # d(total loss)/d(this batch's loss), x the loss scale
                dev.upload(self.seed)
                seed = {loss: self.seed}
            grads = tape.backward(seed).by_name({n: params[n] for n in bases})
            grads = {n: (take_rows(grads[views[n][0]], *views[n][1:]) if n in views else grads[n])
                     for n in self.names if (views[n][0] if n in views else n) in grads}
            if self.kind == "train":
                self._update_with_views(grads, params, views)
            else:
                for n, g in grads.items():
                    ops.add(t._acc[n], g, out=t._acc[n])
        copy_words(loss, self.loss_host)
        dev.sync_local(self.loss_host)
        self._record_extras(extras, dev)

    def _build(self):
        t, dev = self.trainer, self.trainer.model.device
        params = t.model.parameters()
        views = t.model.parameter_views() if hasattr(t.model, "parameter_views") else {}
        with record(dev) as prog:
            if self.kind == "apply":
                self._record_apply(params, views)
            else:
                self._record_batch(params, views)
        self.program = prog

    def run(self, inputs: dict | None = None, weight: float = 1.0):
        """Write the batch, run the program (recording it the first time); (loss, pre-clip norm, extras)."""
        for n, buf in self.inputs.items():
            buf.write_staging(inputs[n])
        scaler = self.trainer.scaler
        if self.kind == "micro" or (self.kind == "train" and scaler is not None):
            self.seed.write_staging(np.array([weight * (scaler.scale if scaler is not None else 1.0)], np.float32))
        if self.updates and scaler is not None:
            self.trainer._scale_buf.write_staging(scaler.device_words())
        if self.updates:
            self.trainer.optimizer.begin_step()
        if self.program is None:
            self._build()  # records and runs the first step
        else:
            self.program.run()
        loss = float(self.loss_host.read_staging()[0]) if self.kind != "apply" else None
        extras = {}
        if self.extras_host is not None:
            extras = dict(zip(self.extra_names, (float(v) for v in self.extras_host.read_staging())))
        norm = None
        if self.updates and (self.max_norm > 0 or self.track):
            norm = float(self.norm_host.read_staging()[0])  # the norm itself (clip_grad_norm's state)
        if self.updates and scaler is not None:
            overflow = not math.isfinite(float(self.overflow_host.read_staging()[0]))
            self.trainer._last_overflow = overflow
            if not scaler.update(overflow):
                # no weight and no moment changed: AdamW's bias correction does not advance either
                self.trainer.optimizer.step_count -= 1
        return loss, norm, extras


class GroupStep:
    """One optimizer step over accum_steps batches recorded as one program (one submit per step): each
    batch's forward and backward (seeded with its weight), added into the accumulation buffers, then
    the clip and AdamW of the apply step. Used when no data-parallel all-reduce has to sit in between."""

    def __init__(self, trainer, shapes: tuple, names: tuple, max_norm: float, track: bool):
        self.trainer = trainer
        self.micros = [RecordedStep(trainer, B, L, names, 0.0, False, "micro", gs) for B, L, gs in shapes]
        self.apply = RecordedStep(trainer, 0, 0, names, max_norm, track, "apply")
        self.program = None

    def _build(self):
        t, dev = self.trainer, self.trainer.model.device
        params = t.model.parameters()
        views = t.model.parameter_views() if hasattr(t.model, "parameter_views") else {}
        with record(dev) as prog:
            for m in self.micros:
                m._record_batch(params, views)
            self.apply._record_apply(params, views)
        self.program = prog

    def run(self, batches: list):
        """batches: [(inputs, weight)] in the recorded order; (weighted loss, pre-clip norm, extras)."""
        t = self.trainer
        scaler = t.scaler
        for m, (inputs, w) in zip(self.micros, batches):
            for n, buf in m.inputs.items():
                buf.write_staging(inputs[n])
            m.seed.write_staging(np.array([w * (scaler.scale if scaler is not None else 1.0)], np.float32))
        if scaler is not None:
            t._scale_buf.write_staging(scaler.device_words())
        t.optimizer.begin_step()
        if self.program is None:
            self._build()  # records and runs the first step of this group shape
        else:
            self.program.run()
        loss, extras = 0.0, {}
        for m, (_, w) in zip(self.micros, batches):
            loss += float(m.loss_host.read_staging()[0]) * w
            if m.extras_host is not None:
                extras.update(zip(m.extra_names, (float(v) for v in m.extras_host.read_staging())))
        a = self.apply
        norm = float(a.norm_host.read_staging()[0]) if (a.max_norm > 0 or a.track) else None
        if scaler is not None:
            overflow = not math.isfinite(float(a.overflow_host.read_staging()[0]))
            t._last_overflow = overflow
            if not scaler.update(overflow):
                t.optimizer.step_count -= 1  # a skipped step does not advance AdamW's bias correction
        return loss, norm, extras
