"""Loss plots: a readable one through matplotlib (optional `plot` extra), and a dependency-free PNG
writer (zlib + struct: axes, a light grid and the curve, no text) used only when matplotlib is absent."""
from __future__ import annotations

import struct
from io import BytesIO
import zlib

import numpy as np

from ..io.atomic import atomic_write


def _png(rgb: np.ndarray) -> bytes:
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _line(img, x0, y0, x1, y1, color):
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    xs = np.linspace(x0, x1, n).round().astype(int)
    ys = np.linspace(y0, y1, n).round().astype(int)
    for dx in (0, 1):
        for dy in (0, 1):
            img[np.clip(ys + dy, 0, img.shape[0] - 1), np.clip(xs + dx, 0, img.shape[1] - 1)] = color


def loss_curve_png(losses, path: str, width: int = 640, height: int = 360) -> None:
    """Plot losses (one per step) and write a PNG atomically."""
    y = np.asarray(losses, np.float64)
    if y.size == 0:
        raise ValueError("no losses to plot")
    img = np.full((height, width, 3), 255, np.uint8)
    L, R, T, B = 50, 20, 20, 40
    lo, hi = float(y.min()), float(y.max())
    hi = hi if hi > lo else lo + 1.0
    for k in range(5):  # grid
        gy = T + (height - T - B) * k / 4
        img[int(gy), L:width - R] = 225
    _line(img, L, T, L, height - B, (0, 0, 0))
    _line(img, L, height - B, width - R, height - B, (0, 0, 0))
    xs = L + (width - L - R) * (np.arange(y.size) / max(y.size - 1, 1))
    ys = T + (height - T - B) * (hi - y) / (hi - lo)
    for i in range(1, y.size):
        _line(img, xs[i - 1], ys[i - 1], xs[i], ys[i], (31, 119, 180))
    if y.size == 1:
        _line(img, xs[0], ys[0], xs[0], ys[0], (31, 119, 180))
    atomic_write(path, _png(img))


# -- a readable loss plot (a moving average over the raw points) --------------------------------------
def smooth(y, window: int | None = None) -> np.ndarray:
    """Trailing moving average over `window` steps (default ~5% of them, at least 1)."""
    y = np.asarray(y, np.float64)
    w = max(1, min(y.size, window if window is not None else y.size // 20))
    c = np.cumsum(np.concatenate([[0.0], y]))
    idx = np.arange(1, y.size + 1)
    lo = np.maximum(0, idx - w)
    return (c[idx] - c[lo]) / (idx - lo)


def write_losses_csv(history: list, path: str) -> None:
    """One row per step: step, epoch, loss, grad_norm (empty when not tracked), tokens."""
    lines = ["step,epoch,loss,grad_norm,tokens"]
    for h in history:
        gn = h.get("grad_norm")
        lines.append(f"{h['step']},{h['epoch']},{h['loss']!r},{'' if gn is None else repr(float(gn))},{h['tokens']}")
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def plot_losses(history: list, path: str, title: str = "training loss", note: str = "") -> str:
    """A loss plot a person can read: title, axis labels and tick values, the raw per-step loss and its
    moving average, dashed lines at epoch boundaries. With matplotlib (the optional `plot` extra);
    without it, the dependency-free curve above (no text). Returns which was used: 'matplotlib' or
    'fallback'."""
    if not history:
        raise ValueError("no losses to plot")
    y = np.array([h["loss"] for h in history], np.float64)
    steps = np.arange(1, y.size + 1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        loss_curve_png(y, path)
        return "fallback"
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        ax.plot(steps, y, color="#1f77b4", alpha=0.35, linewidth=0.8, label="loss per step")
        w = max(1, min(100, y.size // 10))
        ax.plot(steps, smooth(y, w), color="#1f77b4", linewidth=2.0, label=f"moving average ({w} step{'s' if w > 1 else ''})")
        epochs = [h["epoch"] for h in history]
        for k in range(1, len(epochs)):
            if epochs[k] != epochs[k - 1]:
                ax.axvline(k + 0.5, color="0.5", linestyle="--", linewidth=0.8)
                ax.text(k + 0.5, 1.0, f" epoch {epochs[k]}", transform=ax.get_xaxis_transform(), va="top",
                        fontsize=8, color="0.4")
        ax.set_title(title + (f"\n{note}" if note else ""), fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy loss (nats/token)")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        buf = BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    atomic_write(path, buf.getvalue())
    return "matplotlib"
