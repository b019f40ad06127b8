"""Training image models (models.ConvAE): a seeded procedural image set (no downloads), ImageTrainer (a
preset of the one Trainer) and a PNG grid of images beside their reconstructions."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..io.atomic import atomic_write
from ..runtime import tensor
from .plot import _png
from .trainer import Trainer


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


class ImageTrainer:
    """A preset of the one Trainer for image models (AdamW, weight decay 0, gradient-norm clipping; one
    submit per step): train(images) / evaluate(images) / reconstruct(images)."""

    def __init__(self, model, lr: float = 3e-3, weight_decay: float = 0.0, max_grad_norm: float = 1.0, seed: int = 0):
        self.trainer = Trainer(model, seed=seed)
        self.model, self.lr, self.weight_decay = model, float(lr), float(weight_decay)
        self.max_grad_norm = float(max_grad_norm)

    @property
    def history(self) -> list[dict]:
        """The Trainer's history: per step epoch, step, loss, grad_norm (pre-clip), ..."""
        return self.trainer.history

    @property
    def optimizer(self):
        """The Trainer's AdamW."""
        return self.trainer.optimizer

    @staticmethod
    def _check(images) -> np.ndarray:
        images = np.asarray(images, np.float32)
        if images.ndim != 4 or images.shape[0] == 0:
            raise ShapeError(f"images must be a non-empty [N, C, H, W] array, got shape {images.shape}")
        return images

    def train(self, images, epochs: int = 1, batch_size: int = 16, time_limit: float | None = None,
              on_epoch_end=None, progress: bool = False, **settings) -> list[float]:
        """Train on shuffled batches of images; the mean loss of each epoch. time_limit stops at the first
        step past it (seconds); on_epoch_end(epoch, loss). Further keywords are Trainer.train settings."""
        images = self._check(images)
        if batch_size < 1 or batch_size > images.shape[0]:
            raise ShapeError(f"batch_size {batch_size} must be in 1..{images.shape[0]}")
        hook = None if on_epoch_end is None else (lambda e, loss, _norm: on_epoch_end(e, loss))
        return self.trainer.train(images, epochs=epochs, batch_size=batch_size, lr=self.lr,
                                  weight_decay=self.weight_decay, max_grad_norm=self.max_grad_norm,
                                  track_grad_norm=True, time_limit=time_limit, on_epoch_end=hook,
                                  progress=progress, **settings)

    def evaluate(self, images, batch_size: int = 16) -> float:
        """Mean loss over the images (no update)."""
        images = self._check(images)
        return self.trainer.evaluate(images, batch_size=min(batch_size, images.shape[0]))

    def reconstruct(self, images) -> np.ndarray:
        """The model's output for images (eager, one batch)."""
        images = self._check(images)
        return self.model.forward(tensor(images, device=self.model.device)).numpy()
