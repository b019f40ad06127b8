"""`evermind-vk reconstruct`: run a trained image autoencoder (a ConvAE: model.npz with its config.json, an
.evermind package of modelType evermind-conv-ae, or a run directory) on PNG images or procedural shapes;
write the inputs above their reconstructions as one PNG grid, each image's error as CSV, and print the
mean squared error and PSNR."""
from __future__ import annotations

import argparse
import io
import math
import os

import numpy as np

from ..errors import ShapeError, UnsupportedError
from ..io.atomic import atomic_write
from ..models import ConvAE
from ..runtime import tensor
from ..train import image_grid_png, shapes_dataset
from .args import add_device
from .common import NONNEG_INT, POS_INT, CliError, check_out_dir, load_model, png_bytes, say

MAX_IMAGES = 1024  # images one command reconstructs at most (--shapes, --limit)
GRID_COLUMNS = 8  # images per row of the grid: a row of inputs, then a row of their reconstructions
OUTPUTS = ("reconstructions.png", "reconstruction.csv")


def _decode_png(raw: bytes, channels: int) -> np.ndarray:
    """One PNG as float32 [channels, H, W] in [0, 1] (grey is repeated to RGB; RGB averaged to grey)."""
    try:
        import matplotlib.image as mpimg  # optional dependency (the `plot` extra), as `video` reads PNGs
    except ImportError as e:
        raise UnsupportedError("reading PNG images needs matplotlib: pip install 'evermind-vk[plot]' "
                               "(or use --shapes N)") from e
    a = np.asarray(mpimg.imread(io.BytesIO(raw), format="png"))
    if np.issubdtype(a.dtype, np.integer):
        a = a.astype(np.float32) / np.iinfo(a.dtype).max
    a = a.astype(np.float32)
    a = a[..., None] if a.ndim == 2 else a
    a = a[..., :1] if a.shape[-1] in (1, 2) else a[..., :3]  # grey(+alpha) or RGB(+alpha)
    if channels == 1 and a.shape[-1] == 3:
        a = a.mean(axis=-1, keepdims=True)
    elif channels == 3 and a.shape[-1] == 1:
        a = np.repeat(a, 3, axis=-1)
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def read_pngs(path: str, size: int, channels: int, limit: int) -> tuple[list, np.ndarray]:
    """(names, images [N, channels, size, size]) from a PNG file or the first `limit` PNGs (by name) of a
    folder; each PNG's size is checked from its header against the model's before it is decoded."""
    if os.path.isdir(path):
        files = sorted(f for f in os.listdir(path) if f.lower().endswith(".png"))
        if not files:
            raise CliError(f"--images {path}: no .png files in the folder")
        if len(files) > limit:
            say(f"--images {path}: {len(files)} PNGs; reconstructing the first {limit} (--limit)")
        files = [os.path.join(path, f) for f in files[:limit]]
    else:
        files = [path]
    pngs = [png_bytes(f, "--images file") for f in files]
    for f, (_raw, w, h) in zip(files, pngs):
        if (w, h) != (size, size):
            raise ShapeError(f"--images {f}: {w}x{h} pixels; the model takes {size}x{size} images")
    return [os.path.basename(f) for f in files], np.stack([_decode_png(raw, channels) for raw, _w, _h in pngs])


def reconstruct(model: ConvAE, images: np.ndarray, batch_size: int) -> np.ndarray:
    """The model's reconstructions of images [N, C, S, S], batch_size images per forward pass."""
    out = [model.forward(tensor(np.ascontiguousarray(images[i:i + batch_size]), device=model.device)).numpy()
           for i in range(0, images.shape[0], batch_size)]
    return np.concatenate(out)


def _grid_rows(images: np.ndarray, recon: np.ndarray) -> list:
    rows = []
    for i in range(0, images.shape[0], GRID_COLUMNS):
        rows += [images[i:i + GRID_COLUMNS], recon[i:i + GRID_COLUMNS]]
    return rows


def _load_conv_ae(path: str, device) -> ConvAE:
    model = load_model(path, device=device)
    if not isinstance(model, ConvAE):
        what = "a media EvermindLM package" if isinstance(model, tuple) else f"a {type(model).__name__}"
        raise CliError(f"--model {path}: {what}; reconstruct runs image autoencoders (train --model conv-ae)")
    if model.config.channels not in (1, 3):
        raise CliError(f"--model {path}: images of {model.config.channels} channels; reconstruct reads and "
                       "writes PNGs, so it takes models of 1 (grey) or 3 (RGB) channels")
    return model


def cmd_reconstruct(args) -> int:
    """Encode and decode images with a ConvAE; write the grid and the per-image errors."""
    if args.limit > MAX_IMAGES or (args.shapes or 0) > MAX_IMAGES:
        raise CliError(f"at most {MAX_IMAGES} images per command (--shapes, --limit)")
    check_out_dir(args.out, list(OUTPUTS))
    model = _load_conv_ae(args.model, args.device)
    c = model.config
    if args.images is not None:
        names, images = read_pngs(args.images, c.image_size, c.channels, args.limit)
        source = f"{len(names)} PNG image{'s' if len(names) > 1 else ''} from {args.images}"
    else:
        n = args.shapes or 8
        images = shapes_dataset(n, c.image_size, c.channels, seed=args.seed)
        names = [f"shape{i:04d}" for i in range(n)]
        source = f"{n} procedural images (seed {args.seed})"
    recon = reconstruct(model, images, args.batch_size)
    errors = ((recon.astype(np.float64) - images) ** 2).reshape(len(names), -1).mean(axis=1)
    mse = float(errors.mean())
    psnr = 10 * math.log10(1 / mse) if mse > 0 else math.inf
    grid, csv = (os.path.join(args.out, n) for n in OUTPUTS)
    image_grid_png(_grid_rows(images, recon), grid)
    atomic_write(csv, ("image,mse\n" + "".join(f"{n},{e:.6g}\n" for n, e in zip(names, errors))).encode())
    say(f"reconstructed {source}, {c.image_size}x{c.image_size}x{c.channels}, with a ConvAE of "
        f"{model.num_parameters():,} parameters (latent {c.latent}x{c.image_size // 4}x{c.image_size // 4})")
    say(f"reconstruction MSE {mse:.6g} (PSNR {psnr:.2f} dB; per image {errors.min():.4g} .. {errors.max():.4g})")
    say(f"wrote {grid} (inputs above their reconstructions), {csv}")
    return 0


def add_parser(sub) -> None:
    """The `reconstruct` subcommand."""
    p = sub.add_parser("reconstruct", help="run a trained conv-ae on PNG images or procedural shapes: a grid of "
                       "inputs and reconstructions, and the reconstruction error",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", required=True,
                   help="a ConvAE: model.npz (config.json beside it), an .evermind package of it, or a run directory")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--images", default=None,
                     help="a PNG file or a folder of PNGs, each the model's image size (grey or RGB)")
    src.add_argument("--shapes", type=POS_INT, default=None,
                     help="N procedural images like train --model conv-ae's (the default when --images is not "
                          "given: 8)")
    p.add_argument("--seed", type=NONNEG_INT, default=1,
                   help="--shapes' seed (train uses 0 by default, so the default 1 shows images it never saw)")
    p.add_argument("--limit", type=POS_INT, default=64, help="--images FOLDER: reconstruct the first N PNGs by name")
    p.add_argument("--batch-size", type=POS_INT, default=16, help="images per forward pass")
    p.add_argument("--out", required=True, help="output directory: reconstructions.png, reconstruction.csv")
    add_device(p)
    p.set_defaults(fn=cmd_reconstruct)
