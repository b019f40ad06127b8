"""A dependency-free loss-curve PNG (zlib + struct): axes, a light grid and the curve."""
from __future__ import annotations

import struct
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
