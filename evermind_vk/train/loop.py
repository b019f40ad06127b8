"""One Trainer.train call: its setup, the epoch loop, the step runner and the hooks after each step.

The loop is the same for every model type (models.protocol): the data source cuts the data into batches
(token chunks, sequences or rows), each optimizer step runs one recorded program (or accum_steps micro
programs and an apply program), and the hooks record the history, evaluate, report progress, save and
decide whether to stop (epochs done, max_steps, time_limit, a signal)."""
from __future__ import annotations

import math
import signal
import threading
import time

import numpy as np

from ..errors import CheckpointMismatchError, NonFiniteError, UnsupportedError
from ..runtime import zeros
from .progress import Progress


def install_signals(trainer):
    """SIGINT/SIGTERM set a flag read at the next step boundary; a second one raises at once. Returns the
    previous handlers (None off the main thread, where signals cannot be caught)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    old = {}

    def handler(signum, frame):
        if trainer._stop_signal is not None:  # asked twice: stop now
            raise KeyboardInterrupt
        trainer._stop_signal = signum

    for sig in (signal.SIGINT, signal.SIGTERM):
        old[sig] = signal.signal(sig, handler)
    return old


def data_signature(source, global_batch: int, accum_steps: int) -> dict:
    """What a resumed run must share with the saved one: the data, its cutting and the batching."""
    return {"dataset": source.fingerprint(), "seq_len": source.seq_len, "batch_size": global_batch,
            "accum_steps": accum_steps, "chunks": len(source)}


def check_resume_data(position, signature: dict) -> None:
    """CheckpointMismatchError unless a resumed position was saved with this data signature."""
    if position is not None and position["data"] != signature:
        raise CheckpointMismatchError(f"resumed run's data or batching differ from the checkpoint's: "
                                      f"{ {k: v for k, v in signature.items() if position['data'].get(k) != v} }")


class TrainRun:
    """The state of one train() call; run() returns the mean loss of each epoch (a partial epoch, cut short
    by any stop, included: the history says how many steps it ran)."""

    def __init__(self, trainer, source, eval_source, cfg):
        self.t, self.src, self.eval_src, self.cfg = trainer, source, eval_source, cfg
        self.dp = trainer._dp
        self.gbs = cfg.batch_size * (self.dp.size if self.dp is not None else 1)
        self.names = trainer.trainable(cfg.freeze, cfg.wsla)
        self._setup_optimizer()
        self.data = data_signature(source, self.gbs, cfg.accum_steps)
        self.single = cfg.accum_steps == 1 and self.dp is None
        if not self.single:
            self._make_accumulators()
        self.n_batches = -(-len(source) // self.gbs)
        self.tokens = 0
        self.t0 = time.perf_counter()
        self.stop = self.timed_out = False

    # -- setup ----------------------------------------------------------------------------------------
    def _setup_optimizer(self) -> None:
        t, cfg = self.t, self.cfg
        opt = t.optimizer
        opt.params.update({n: p for n, p in t.model.parameters().items() if n not in opt.params})  # LoRA added later
        opt.set_hyper(lr=cfg.lr, weight_decay=cfg.weight_decay, max_delta=cfg.trust_region)  # checked: finite, >= 0
        opt.schedule = cfg.schedule
        groups = []
        for g in cfg.param_groups or ():
            pats = [g["params"]] if isinstance(g["params"], str) else list(g["params"])
            taken = {n for gg in groups for n in gg["params"]}
            groups.append({"params": [n for n in self.names if t.match(n, pats) and n not in taken],
                           "lr": g.get("lr"), "weight_decay": g.get("weight_decay")})
        opt.set_param_groups(groups)

    def _make_accumulators(self) -> None:
        t, dp = self.t, self.dp
        views = t.model.parameter_views() if hasattr(t.model, "parameter_views") else {}
        if dp is not None and dp.zero and any(n in views for n in self.names):
            raise UnsupportedError("ZeRO (zero=True) with row-range parameters (WSLA on mamba2/mamba3 layers) is "
                                   "not supported: the owner's rows would not reach the other ranks' base "
                                   "tensors; train these without zero")
        dev, params = t.model.device, t.model.parameters()
        with dev.eager():
            for n in self.names:
                if n not in t._acc:  # a row-range parameter accumulates its rows only
                    shape = (views[n][2], params[views[n][0]].shape[1]) if n in views else params[n].shape
                    t._acc[n] = zeros(shape, "f32", dev, host_visible=dp is not None)

    # -- the loop -------------------------------------------------------------------------------------
    def run(self) -> list[float]:
        """Train from the resumed position (or the start) to a stop; save at the end when asked."""
        t, cfg = self.t, self.cfg
        if self.dp is not None:
            self.dp.drop_foreign_state()
        check_resume_data(t._resume_position, self.data)
        pos, t._resume_position = t._resume_position, None
        self.losses = list(pos["losses"]) if pos else []
        unit = {"tokens": "tok", "images": "img"}.get(t.model.data_kind, "row")
        self.bar = Progress(cfg.epochs, self.n_batches, cfg.time_limit, unit=unit) if cfg.progress else None
        old_handlers = install_signals(t) if cfg.stop_on_signal else None
        t.interrupted = t._stop_signal = None
        t.stopped_by = "epochs"
        partial = None
        try:
            for epoch in range(pos["epoch"] if pos else 0, cfg.epochs):
                partial = self._epoch(epoch, pos)
                pos = None
                if self.stop:
                    break
        finally:
            if old_handlers is not None:
                for sig, h in old_handlers.items():
                    signal.signal(sig, h)
        if self.dp is not None:
            self.dp.check_identical()
        if cfg.save_key and t._position is not None:
            t.save_finite(cfg.save_key, cfg.save_dir)
        return self.losses + ([partial] if partial is not None else [])

    def _epoch(self, epoch: int, pos) -> float | None:
        """One epoch (or its rest, resumed mid-epoch); the partial epoch's mean if a stop cut it short."""
        t, cfg = self.t, self.cfg
        if pos is not None and pos["epoch"] == epoch and pos["order"] is not None:  # resumed mid-epoch
            order = np.asarray(pos["order"], dtype=np.int64)
            done, total, count, norms = pos["batch"], pos["total"], pos["count"], list(pos["norms"])
        else:
            order = (np.random.default_rng(t.seed + epoch).permutation(len(self.src)) if cfg.shuffle
                     else np.arange(len(self.src)))
            done, total, count, norms = 0, 0.0, 0, []
        batch_list = self.src.batches(self.gbs, order)
        while done < len(batch_list):
            self._check_stop()
            if self.stop:
                break
            group = batch_list[done:done + cfg.accum_steps]
            n_tok = sum(b[1] for b in group)
            step_scale = t.scaler.scale if t.scaler is not None else None
            loss, norm, extras = self._step(group, n_tok)
            done += len(group)
            t.global_step += 1
            total, count = total + loss * n_tok, count + n_tok
            if norm is not None:
                norms.append(norm)
            self._after_step(epoch, done, loss, norm, n_tok, extras, step_scale,
                             {"epoch": epoch, "batch": done, "order": order, "total": total, "count": count,
                              "norms": norms, "losses": list(self.losses), "data": self.data})
        if self.bar is not None and (done >= len(batch_list) or self.stop):
            self.bar.end_epoch()  # the summary below gets a line of its own
        mean_norm = float(np.mean(norms)) if (cfg.track_grad_norm and norms) else None
        if done >= len(batch_list):
            self.losses.append(total / max(count, 1))
            t._position = {"epoch": epoch + 1, "batch": 0, "order": None, "total": 0.0, "count": 0,
                           "norms": [], "losses": list(self.losses), "data": self.data}
            if cfg.on_epoch_end is not None:
                cfg.on_epoch_end(epoch + 1, self.losses[-1], mean_norm)
            return None
        if not count:
            return None
        # Stopped mid-epoch (time limit, max_steps or a signal): the epoch's mean over the steps it ran is
        # reported; the saved position still resumes mid-epoch, where the epoch's full mean is reported.
        if cfg.on_epoch_end is not None:
            cfg.on_epoch_end(epoch + 1, total / count, mean_norm)
        return total / count

    def _check_stop(self) -> None:
        t, cfg = self.t, self.cfg
        if cfg.max_steps is not None and t.global_step >= cfg.max_steps:
            self.stop, t.stopped_by = True, "max_steps"
        if t._stop_signal is not None and self.dp is None:  # data-parallel: agreed after each step
            t.interrupted, self.stop, t.stopped_by = t._stop_signal, True, "signal"

    # -- one optimizer step ---------------------------------------------------------------------------
    def _step(self, group: list, n_tok: int):
        """Run one optimizer step over `group` (accum_steps batches); (loss, pre-clip norm, extras)."""
        t, cfg, dp = self.t, self.cfg, self.dp
        if self.single:
            inputs, _, B, L = group[0]
            step = t._step(B, L, self.names, cfg.max_grad_norm, cfg.track_grad_norm, "train")
            loss, norm, extras = step.run(inputs)
        elif dp is None:  # the whole step in one program
            shapes = [(B, L, n / n_tok) for _, n, B, L in group]
            step = t._group_step(shapes, self.names, cfg.max_grad_norm, cfg.track_grad_norm)
            loss, norm, extras = step.run([(inputs, n / n_tok) for inputs, n, _, _ in group])
        else:
            loss, extras = 0.0, {}
            for batch in group:
                if dp is not None:  # this rank's rows -> all-reduce (host) -> the same clip and AdamW
                    batch = self.src.shard(batch, dp.rank, cfg.batch_size)
                inputs, n, B, L = batch
                if not n:
                    continue
                w = n / n_tok
                micro = t._step(B, L, self.names, 0.0, False, "micro", grad_scale=w)
                micro_loss, _, ex = micro.run(inputs, weight=w)
                loss += micro_loss * w
                extras.update(ex)
            if dp is not None:
                loss = dp.all_reduce_grads(self.names, loss)
            _, norm, _ = t._step(0, 0, self.names, cfg.max_grad_norm, cfg.track_grad_norm, "apply").run()
            if dp is not None:
                dp.broadcast_params(self.names)
        if t.scaler is not None and t._last_overflow:
            norm = None  # an overflowing (skipped) step has no gradient norm (and NaN breaks JSON)
        if not math.isfinite(loss):
            raise NonFiniteError(f"loss became {loss} at step {t.global_step + 1}; {t.last_finite()}")
        return loss, norm, extras

    # -- the hooks after a step -----------------------------------------------------------------------
    def _after_step(self, epoch, done, loss, norm, n_tok, extras, step_scale, position) -> None:
        t, cfg, dp = self.t, self.cfg, self.dp
        self.tokens += n_tok
        entry = {"epoch": epoch + 1, "step": t.global_step, "loss": loss, "grad_norm": norm,
                 "tokens": n_tok, "effective_lr": t.optimizer.effective_lr, **extras}
        if t.scaler is not None:  # the scale this step used, and whether it overflowed (skipped)
            entry["loss_scale"] = float(step_scale)
            entry["overflow"] = t._last_overflow
        if self.eval_src is not None and cfg.eval_every and t.global_step % cfg.eval_every == 0:
            entry[t.eval_key] = t._evaluate_source(self.eval_src, cfg.batch_size)
        t.history.append(entry)
        t._position = position
        if cfg.on_step is not None:
            cfg.on_step(t.global_step, dict(entry))
        if self.bar is not None:
            self.bar.update(epoch, done, loss, self.tokens, time.perf_counter() - self.t0, lr=entry["effective_lr"])
        if cfg.save_key and cfg.save_every and t.global_step % cfg.save_every == 0:
            t.save_finite(cfg.save_key, cfg.save_dir)
        if cfg.time_limit is not None and time.perf_counter() - self.t0 > cfg.time_limit:
            self.stop = self.timed_out = True
            t.stopped_by = "time_limit"
        if dp is not None:  # all ranks stop at the same step
            self.stop, self.timed_out, sig = dp.agree(self.stop, self.timed_out, t._stop_signal)
            if sig is not None:
                t.interrupted, t.stopped_by = sig, "signal"
            elif self.timed_out:
                t.stopped_by = "time_limit"
