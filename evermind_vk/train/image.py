"""Training image models (any model with `parameters()` and `loss(x)` on NCHW batches, e.g.
models.ConvAE): a seeded procedural image set (no downloads), a trainer whose step (upload the batch,
forward, backward, clip, AdamW, copy the loss to host memory) is recorded once per batch size and
replayed with one submit per step, and a PNG grid of images beside their reconstructions."""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from ..autodiff import Tape
from ..errors import EvermindError, ShapeError
from ..io.atomic import atomic_write
from ..runtime import empty, record, tensor
from ..runtime.kernels import copy_words
from .optim import AdamW, clip_grad_norm
from .plot import _png


def shapes_dataset(n: int, size: int = 16, channels: int = 3, seed: int = 0) -> np.ndarray:
    """n seeded images [n, channels, size, size] in [0, 1]: a linear colour gradient in a random
    direction with one filled disc, rectangle or band of stripes of a random colour on top."""
    if n < 1 or size < 4 or channels < 1:
        raise ShapeError(f"shapes_dataset: need n >= 1, size >= 4, channels >= 1 (got {n}, {size}, {channels})")
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / (size - 1)
    out = np.empty((n, channels, size, size), np.float32)
    for i in range(n):
        a = rng.uniform(0, 2 * np.pi)
        t = (np.cos(a) * xx + np.sin(a) * yy)
        t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
        c0, c1 = rng.uniform(0, 1, channels), rng.uniform(0, 1, channels)
        img = c0[:, None, None] * (1 - t) + c1[:, None, None] * t
        kind = rng.integers(3)
        cx, cy = rng.uniform(0.25, 0.75, 2)
        if kind == 0:
            mask = (xx - cx) ** 2 + (yy - cy) ** 2 < rng.uniform(0.1, 0.3) ** 2
        elif kind == 1:
            hw, hh = rng.uniform(0.1, 0.3, 2)
            mask = (np.abs(xx - cx) < hw) & (np.abs(yy - cy) < hh)
        else:
            period = rng.uniform(0.2, 0.4)
            mask = (np.mod((xx if rng.integers(2) else yy) + cx, period) < period / 2) & (np.abs(yy - cy) < 0.3)
        col = rng.uniform(0, 1, channels)
        img = np.where(mask[None], col[:, None, None], img)
        out[i] = img
    return out


def image_grid_png(rows: list, path: str, scale: int = 4, pad: int = 2) -> None:
    """Write rows of images (each an array [n, C, H, W], C = 1 or 3, values clipped to [0, 1]) as one
    PNG grid (each pixel scale x scale), atomically."""
    rows = [np.asarray(r, np.float32) for r in rows]
    if not rows or any(r.ndim != 4 or r.shape[1] not in (1, 3) for r in rows):
        raise ShapeError("image_grid_png takes rows of [n, 1 or 3, H, W] images")
    n = max(r.shape[0] for r in rows)
    H, W = rows[0].shape[2] * scale, rows[0].shape[3] * scale
    img = np.full((len(rows) * (H + pad) + pad, n * (W + pad) + pad, 3), 255, np.uint8)
    for ri, r in enumerate(rows):
        for ci in range(r.shape[0]):
            a = np.clip(r[ci], 0, 1)
            a = np.repeat(a, 3, axis=0) if a.shape[0] == 1 else a
            a = np.kron(a.transpose(1, 2, 0), np.ones((scale, scale, 1)))
            y0, x0 = pad + ri * (H + pad), pad + ci * (W + pad)
            img[y0:y0 + a.shape[0], x0:x0 + a.shape[1]] = np.round(a * 255).astype(np.uint8)
    atomic_write(path, _png(img))


class _ImageStep:
    """One recorded step for a fixed batch shape (and trainable set and clip)."""

    def __init__(self, trainer, shape: tuple, train: bool):
        self.trainer, self.shape, self.train = trainer, shape, train
        dev = trainer.model.device
        self.x = empty(shape, "f32", dev, host_visible=True)
        self.loss_host = empty((1,), "f32", dev, host_visible=True)
        self.norm_host = empty((2,), "f32", dev, host_visible=True)
        self.program = None

    def _build(self):
        t, dev = self.trainer, self.trainer.model.device
        with record(dev) as prog:
            dev.upload(self.x)
            if self.train:
                with Tape() as tape:
                    loss = t.model.loss(self.x)
                grads = tape.backward(loss).by_name(t.model.parameters())
                metrics = clip_grad_norm(grads, t.max_grad_norm)
                copy_words(metrics.state, self.norm_host)
                dev.sync_local(self.norm_host)
                t.optimizer.record_updates(grads)
            else:
                loss = t.model.loss(self.x)
            copy_words(loss, self.loss_host)
            dev.sync_local(self.loss_host)
        self.program = prog

    def run(self, batch: np.ndarray):
        self.x.write_staging(batch)
        if self.train:
            self.trainer.optimizer.begin_step()
        if self.program is None:
            self._build()  # records and runs the first step
        else:
            self.program.run()
        loss = float(self.loss_host.read_staging()[0])
        norm = math.sqrt(max(float(self.norm_host.read_staging()[0]), 0.0)) if self.train else None
        return loss, norm


class ImageTrainer:
    """Trains a model on image batches with AdamW and gradient-norm clipping; one submit per step."""

    def __init__(self, model, lr: float = 3e-3, weight_decay: float = 0.0, max_grad_norm: float = 1.0, seed: int = 0):
        self.model = model
        self.optimizer = AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        self.max_grad_norm = float(max_grad_norm)
        self.seed = seed
        self._steps: dict[tuple, _ImageStep] = {}
        self.history: list[dict] = []  # per step: epoch, step, loss, grad_norm (pre-clip)

    def _step(self, shape, train) -> _ImageStep:
        key = (tuple(shape), train)
        if key not in self._steps:
            self._steps[key] = _ImageStep(self, tuple(shape), train)
        return self._steps[key]

    @staticmethod
    def _check(images) -> np.ndarray:
        images = np.asarray(images, np.float32)
        if images.ndim != 4 or images.shape[0] == 0:
            raise ShapeError(f"images must be a non-empty [N, C, H, W] array, got shape {images.shape}")
        return images

    def train(self, images, epochs: int = 1, batch_size: int = 16, time_limit: float | None = None,
              on_epoch_end=None, progress: bool = False) -> list[float]:
        """Train on shuffled full batches (a remainder smaller than batch_size is dropped each epoch);
        returns the mean loss of each epoch. time_limit stops at the first step past it (seconds)."""
        images = self._check(images)
        if batch_size < 1 or batch_size > images.shape[0]:
            raise ShapeError(f"batch_size {batch_size} must be in 1..{images.shape[0]}")
        step = self._step((batch_size, *images.shape[1:]), True)
        n_batches = images.shape[0] // batch_size
        losses, t0 = [], time.perf_counter()
        for epoch in range(epochs):
            order = np.random.default_rng(self.seed + epoch).permutation(images.shape[0])
            total = 0.0
            for bi in range(n_batches):
                loss, norm = step.run(images[order[bi * batch_size:(bi + 1) * batch_size]])
                if not math.isfinite(loss):
                    raise EvermindError(f"loss became {loss} at epoch {epoch + 1}, step {bi + 1}")
                total += loss
                self.history.append({"epoch": epoch + 1, "step": len(self.history) + 1, "loss": loss,
                                     "grad_norm": norm})
                if progress:
                    sys.stderr.write(f"\repoch {epoch + 1}/{epochs} step {bi + 1}/{n_batches} loss {loss:.5f} "
                                     f"{time.perf_counter() - t0:5.1f}s ")
                    sys.stderr.flush()
                if time_limit is not None and time.perf_counter() - t0 > time_limit:
                    break
            losses.append(total / (bi + 1))
            if on_epoch_end is not None:
                on_epoch_end(epoch + 1, losses[-1])
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                break
        if progress:
            print(file=sys.stderr)
        return losses

    def evaluate(self, images, batch_size: int = 16) -> float:
        """Mean loss over the full batches of images (no update)."""
        images = self._check(images)
        batch_size = min(batch_size, images.shape[0])
        step = self._step((batch_size, *images.shape[1:]), False)
        n = images.shape[0] // batch_size
        return sum(step.run(images[i * batch_size:(i + 1) * batch_size])[0] for i in range(n)) / n

    def reconstruct(self, images) -> np.ndarray:
        """The model's output for images (eager, one batch)."""
        images = self._check(images)
        return self.model.forward(tensor(images, device=self.model.device)).numpy()
