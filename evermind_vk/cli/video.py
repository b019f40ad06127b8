"""`evermind-vk video`: VideoRVQ encode / decode (frames as PNG: a folder, or one horizontal strip)."""
from __future__ import annotations

import argparse
import io
import json
import os

import numpy as np

from ..errors import FormatError, LimitError
from ..files import load_codec, serialize_codec
from ..io.tokens import load_token_list
from ..io.atomic import atomic_write
from ..models.video_rvq import VideoRVQCodec
from .common import POS_INT, png_bytes


def _read_frames(path: str, n_strip: int) -> list:
    """PNG frames from a folder, or a horizontal strip cut into n_strip equal frames."""
    import matplotlib.image as mpimg  # optional dependency
    files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.lower().endswith(".png")) \
        if os.path.isdir(path) else [path]
    imgs = [np.asarray(mpimg.imread(io.BytesIO(png_bytes(f, "PNG frame")[0]), format="png"), np.float32)[..., :3] for f in files]
    if not os.path.isdir(path):
        strip = imgs[0]
        if n_strip < 1 or strip.shape[1] % n_strip:
            raise FormatError(f"{path}: width {strip.shape[1]} is not {n_strip} equal frames (--frames)")
        w = strip.shape[1] // n_strip
        imgs = [strip[:, i * w:(i + 1) * w] for i in range(n_strip)]
    if not imgs:
        raise FormatError(f"{path}: no PNG frames")
    return imgs


def write_frames(frames: list, out: str) -> None:
    """Frames as a .png strip, or as frameNNNN.png in a folder."""
    import matplotlib.image as mpimg  # optional dependency
    if out.lower().endswith(".png"):
        mpimg.imsave(out, np.concatenate(frames, axis=1))
    else:
        os.makedirs(out, exist_ok=True)
        for i, f in enumerate(frames):
            mpimg.imsave(os.path.join(out, f"frame{i:04d}.png"), f)


MAX_DECODED_BYTES = 1 << 30  # video decode: the frames a token list may decode to (f32 pixels)


def cmd_video(args) -> int:
    """encode: PNG frames to a token list (fitting a codec if none is given); decode: tokens to frames."""
    if args.action == "encode":
        frames = _read_frames(args.input, args.frames)
        H, W, C = frames[0].shape
        if args.codec and os.path.exists(args.codec):
            codec = load_codec(args.codec)
        else:
            codec = VideoRVQCodec(H, W, C, patch=args.patch, levels=args.levels, codebook_size=args.codebook,
                                  keyframe_interval=args.keyframe_interval)
            mse = codec.fit([frames], iterations=args.iterations)
            path = args.codec or os.path.splitext(args.out)[0] + ".vrq0"
            atomic_write(path, serialize_codec(codec))
            print(f"fitted a codec on {len(frames)} frames (reconstruction MSE {mse:.5f}); wrote {path}")
        toks = codec.encode(frames)
        atomic_write(args.out, json.dumps(toks).encode())
        print(f"{len(frames)} frames {W}x{H} -> {len(toks)} tokens; wrote {args.out}")
        return 0
    if not args.codec:
        raise FormatError("video decode needs --codec (a VRQ0 file or a video/image .evermind package)")
    codec = load_codec(args.codec)
    toks = load_token_list(args.input)
    markers = {codec.frame_key, codec.frame_delta}
    n_frames = sum(1 for t in toks if t in markers)
    if n_frames * codec.height * codec.width * codec.channels * 4 > MAX_DECODED_BYTES:  # before decoding any
        raise LimitError(f"{args.input}: {n_frames:,} frames of {codec.width} x {codec.height} would decode to more "
                         f"than {MAX_DECODED_BYTES >> 20} MiB")
    frames = codec.decode(toks)
    if not frames:
        raise FormatError(f"{args.input}: no frames in the token stream")
    write_frames(frames, args.out)
    print(f"{len(toks)} tokens -> {len(frames)} frames; wrote {args.out}")
    return 0


def add_parser(sub) -> None:
    """The `video` subcommand."""
    p = sub.add_parser("video", help="VideoRVQ: encode PNG frames (a folder or a strip) to tokens, or decode tokens",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("action", choices=["encode", "decode"])
    p.add_argument("input", help="encode: a folder of PNGs or one horizontal strip; decode: a JSON token list")
    p.add_argument("--out", required=True, help="encode: tokens JSON; decode: a folder, or a .png strip")
    p.add_argument("--codec", help="VRQ0 file or a video/image .evermind package whose codec to use "
                                   "(encode: a VRQ0 is fitted and written here if absent)")
    p.add_argument("--frames", type=POS_INT, default=1, help="frames in an input strip")
    p.add_argument("--patch", type=POS_INT, default=4, help="patch side in pixels")
    p.add_argument("--levels", type=POS_INT, default=2, help="residual quantisation levels")
    p.add_argument("--codebook", type=POS_INT, default=16, help="codewords per level")
    p.add_argument("--keyframe-interval", type=POS_INT, default=12, help="frames between key frames")
    p.add_argument("--iterations", type=POS_INT, default=8, help="k-means iterations per level")
    p.set_defaults(fn=cmd_video)
