"""builderforce's trainers (spec §7) as presets of the one Trainer: EvermindLMTrainer, MoETrainer and
MambaTrainer keep builderforce's constructor options, defaults, loss definitions and return values, and run
every step through evermind_vk.train.Trainer (recorded programs, save/resume, signals, every loop feature).

All use AdamW with builderforce's defaults (betas 0.9/0.999, eps 1e-8) and, under wsla=True, train only the
model's wsla_parameters() with the per-element trust region max_delta (default 0.05 under WSLA, else 0).

EvermindLMTrainer.fit(sequences): per epoch, in order, each sequence of >= 2 tokens contributes its mean
next-token loss over its T - 1 predicted positions; every `accum_steps` sequences (and at the end of the
epoch) the gradients averaged over the window's sequences make one AdamW step (lr 0.01, weight decay 0, no
clipping). Returns the per-epoch mean of the sequence losses. mixed_precision: builderforce's (f32 compute,
loss-scaled gradients rounded to f16, an overflow skips the step; GradScaler.builderforce(), or a dict of
its options). builderforce multiplies the whole accumulated buffer by the scale after every sequence
(earlier sequences get S^k); here each sequence is scaled once.

MoETrainer.fit(samples): loss 1/2 |out - target|^2 per sample; per batch (batch_size 0 = all samples, in
order) the mean over the batch plus the load-balance gradient (router only, aux_weight E / B, divided by B
again as builderforce does unless aux_divided_twice=False), then AdamW (lr 0.01, weight decay 0). Returns
per epoch {"loss": sum of sample losses / n, "aux_loss": the last batch's load-balance loss}.

MambaTrainer.train(input): builderforce's MambaTrainer options (lr 1e-4, epochs 5, batch_size 1, seq_len
512, max_grad_norm 1, weight decay 0.01, wsla, track_grad_norm) with real backpropagation (builderforce's
own step hands the logits' gradient to every parameter: a quirk not reproduced); returns per-epoch mean
losses; on_epoch_end(epoch, loss, grad_norm). evaluate(input) -> perplexity over the whole input.
"""
from __future__ import annotations

from ..errors import TokenError
from .config import WSLA_MAX_DELTA
from .data import SequenceSource
from .optim import GradScaler
from .trainer import Trainer

__all__ = ["EvermindLMTrainer", "MoETrainer", "MambaTrainer"]


def _preset(model, lr, betas, eps, weight_decay, max_delta, wsla, **trainer_kw) -> tuple[Trainer, dict]:
    """A Trainer with builderforce's AdamW settings, and the train() settings every call shares."""
    trainer = Trainer(model, **trainer_kw)
    trainer.optimizer.set_hyper(betas=betas, eps=eps)
    settings = dict(lr=lr, weight_decay=weight_decay, wsla=wsla,
                    max_delta=(WSLA_MAX_DELTA if wsla else 0.0) if max_delta is None else max_delta)
    return trainer, settings


class EvermindLMTrainer:
    """builderforce's EvermindLMTrainer on the Trainer (see the module docstring)."""

    def __init__(self, model, lr: float = 0.01, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 epochs: int = 1, accum_steps: int = 1, max_delta: float | None = None, checkpoint: bool = False,
                 mixed_precision=False, wsla: bool = False):
        scaler = (GradScaler.builderforce(**mixed_precision) if isinstance(mixed_precision, dict)
                  else GradScaler.builderforce() if mixed_precision else None)
        self.trainer, self.settings = _preset(
            model, lr, betas, eps, weight_decay, max_delta, wsla, scaler=scaler,
            grad_precision="f16" if scaler is not None else "f32",
            loss_options={"checkpoint": True} if checkpoint else {})
        self.model, self.epochs, self.accum = model, int(epochs), max(1, int(accum_steps))

    @property
    def optimizer(self):
        """The Trainer's AdamW."""
        return self.trainer.optimizer

    @property
    def scaler(self):
        """The loss scaler (mixed precision), else None."""
        return self.trainer.scaler

    @property
    def steps(self) -> int:
        """Optimizer steps taken (skipped overflow steps included)."""
        return self.trainer.global_step

    def fit(self, sequences, **settings) -> list[float]:
        """Train on the sequences (lists of token ids); per-epoch mean sequence losses. Further keywords are
        Trainer.train settings (e.g. save_key, max_steps, on_step)."""
        try:
            source = SequenceSource(sequences, self.model.config.vocab_size)
        except ValueError as e:
            raise TokenError(str(e)) from e
        if not len(source):
            return [0.0] * self.epochs
        return self.trainer.train(source, epochs=self.epochs, batch_size=1, accum_steps=self.accum, shuffle=False,
                                  max_grad_norm=0.0, **{**self.settings, **settings})


class MoETrainer:
    """builderforce's MoETrainer on the Trainer (see the module docstring)."""

    def __init__(self, model, lr: float = 0.01, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 aux_weight: float = 0.01, batch_size: int = 0, epochs: int = 1, aux_divided_twice: bool = True,
                 max_delta: float | None = None, wsla: bool = False):
        self.trainer, self.settings = _preset(
            model, lr, betas, eps, weight_decay, max_delta, wsla,
            loss_options={"aux_weight": float(aux_weight), "aux_divided_twice": bool(aux_divided_twice)})
        self.model, self.batch_size, self.epochs = model, int(batch_size), int(epochs)

    @property
    def optimizer(self):
        """The Trainer's AdamW."""
        return self.trainer.optimizer

    def fit(self, samples, **settings) -> list[dict]:
        """Train on (input, target) pairs; per epoch {"loss", "aux_loss"}. Further keywords are
        Trainer.train settings."""
        source = self.trainer.source(samples)
        bs = self.batch_size if self.batch_size > 0 else len(source)
        first = len(self.trainer.history)
        losses = self.trainer.train(source, epochs=self.epochs, batch_size=bs, shuffle=False, max_grad_norm=0.0,
                                    **{**self.settings, **settings})
        out = []
        for e, loss in enumerate(losses, start=1):
            last = [h for h in self.trainer.history[first:] if h["epoch"] == e][-1]
            out.append({"loss": loss, "aux_loss": last["aux_loss"]})
        return out


class MambaTrainer:
    """builderforce's MambaTrainer on the Trainer, for HybridMambaModel (see the module docstring)."""

    def __init__(self, model, tokenizer=None, lr: float = 1e-4, epochs: int = 5, batch_size: int = 1,
                 seq_len: int = 512, max_grad_norm: float = 1.0, weight_decay: float = 0.01,
                 betas=(0.9, 0.999), eps: float = 1e-8, wsla: bool = False, max_delta: float | None = None,
                 track_grad_norm: bool = False, seed: int = 0):
        self.trainer, self.settings = _preset(model, lr, betas, eps, weight_decay, max_delta, wsla,
                                              tokenizer=tokenizer, seed=seed)
        self.model, self.tokenizer = model, tokenizer
        self.settings.update(epochs=int(epochs), batch_size=int(batch_size), seq_len=int(seq_len),
                             max_grad_norm=float(max_grad_norm), track_grad_norm=bool(track_grad_norm))

    @property
    def optimizer(self):
        """The Trainer's AdamW."""
        return self.trainer.optimizer

    def train(self, data, on_epoch_end=None, **settings) -> list[float]:
        """Train on a text (needs a tokenizer, as builderforce) or token ids; per-epoch mean losses."""
        if isinstance(data, str) and self.tokenizer is None:
            raise TokenError("MambaTrainer requires a tokenizer when input is a string. Pass a tokenizer "
                             "instance as the second constructor argument.")
        return self.trainer.train(data, on_epoch_end=on_epoch_end, **{**self.settings, **settings})

    def evaluate(self, data) -> float:
        """Perplexity exp(mean next-token loss) over the whole input as one sequence (builderforce)."""
        ids = self.trainer._ids(data)
        return self.trainer.evaluate(ids, seq_len=ids.size - 1, batch_size=1)
