"""The evermind-vk command."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib.metadata import PackageNotFoundError, version

import numpy as np

from . import __version__
from .errors import BlobError, EvermindError, FormatError
from .files import load_model, save_model
from .io import framing
from .io.checkpoint import checkpoint_hash, decode
from .io.checkpoint import verify as verify_checkpoint
from .io.package import EvermindPackage, fnv1a32
from .models import LMConfig, TransformerLM
from .ops import matmul
from .runtime import devices, get_device, tensor
from .train import ByteTokenizer, Trainer, default_corpus, generate
from .train.plot import loss_curve_png


def cmd_devices(args) -> int:
    for d in devices():
        feats = ", ".join(k for k, v in d.features.items() if v) or "none"
        print(f"[{d.index}] {d.name} ({d.type}) subgroup={d.subgroup_size} shared={d.shared_memory} B "
              f"f16={'yes' if d.f16 else 'no'} coopmat={'yes' if d.coopmat else 'no'}\n    features: {feats}")
    return 0


def cmd_check(args) -> int:
    """Run matmul on the device and compare with numpy (float64)."""
    dev = get_device(args.device)
    rng = np.random.default_rng(0)
    n = args.size
    ok = True
    for dtype in ("f32", "f16"):
        if dtype == "f16" and not dev.info.f16:
            print(f"matmul {dtype}: skipped ({dev.info.name} has no 16-bit storage)")
            continue
        np_dt = np.float16 if dtype == "f16" else np.float32
        a = rng.standard_normal((n, n)).astype(np_dt)
        b = rng.standard_normal((n, n)).astype(np_dt)
        ta, tb = tensor(a, device=dev), tensor(b, device=dev)
        matmul(ta, tb).numpy()  # warm-up: pipeline creation
        t0 = time.perf_counter()
        got = matmul(ta, tb).numpy().astype(np.float64)
        dt = time.perf_counter() - t0
        want = a.astype(np.float64) @ b.astype(np.float64)
        rel = np.abs(got - want).max() / np.abs(want).max()
        tol = 1e-5 if dtype == "f32" else 2e-3
        ok &= rel <= tol
        print(f"matmul {dtype} {n}x{n}x{n} on {dev.info.name}: max rel. error {rel:.2e} "
              f"({'ok' if rel <= tol else 'FAIL'}, tol {tol:g}), {2 * n**3 / dt / 1e9:.2f} GFLOP/s incl. readback")
    return 0 if ok else 1


def cmd_train(args) -> int:
    """Train a TransformerLM (default: the embedded corpus), save it, plot the loss, print a sample."""
    if getattr(args, "model", "transformer") != "transformer":
        return cmd_train_builderforce(args)
    dev = get_device(args.device)
    text = open(args.text, encoding="utf-8").read() if args.text else default_corpus()
    cfg = LMConfig(d_model=args.d_model, n_layers=args.layers, n_heads=args.heads, n_kv_heads=args.kv_heads,
                   d_ff=args.d_ff, max_seq_len=max(args.seq_len, 64), seed=args.seed)
    model = TransformerLM(cfg, device=dev)
    tok = ByteTokenizer()
    ids = tok.encode(text)
    print(f"device: {dev.info.name} | corpus: {len(ids):,} bytes ({'--text ' + args.text if args.text else 'embedded default: Python stdlib docstrings'}) "
          f"| model: {model.num_parameters():,} parameters")
    trainer = Trainer(model, tok, seed=args.seed)
    t0 = time.perf_counter()
    losses = trainer.train(ids, epochs=args.epochs, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                           max_grad_norm=args.max_grad_norm, progress=True, time_limit=args.time_limit,
                           on_epoch_end=lambda e, l, g: print(f"epoch {e}: mean loss {l:.4f}", file=sys.stderr))
    dt = time.perf_counter() - t0
    steps = [h["loss"] for h in trainer.history]
    k = max(1, len(steps) // 10)
    print(f"trained {len(steps)} steps in {dt:.1f}s: loss {np.mean(steps[:k]):.3f} (first {k} steps) -> "
          f"{np.mean(steps[-k:]):.3f} (last {k}); epoch means {', '.join(f'{l:.3f}' for l in losses)}")
    os.makedirs(args.out, exist_ok=True)
    save_model(model, os.path.join(args.out, "model.npz"))
    loss_curve_png(steps, os.path.join(args.out, "loss.png"))
    print(f"wrote {os.path.join(args.out, 'model.npz')} and {os.path.join(args.out, 'loss.png')}")
    prompt = args.prompt
    out = generate(model, tok.encode(prompt), max_new_tokens=args.sample_tokens, temperature=0.8, top_k=20,
                   seed=args.seed)
    print("sample: " + repr(prompt + tok.decode(out)))
    return 0


def cmd_generate(args) -> int:
    if not str(args.model).endswith(".npz"):
        return cmd_generate_any(args)
    model = load_model(args.model, device=get_device(args.device))
    tok = ByteTokenizer()
    out = generate(model, tok.encode(args.prompt), max_new_tokens=args.tokens, temperature=args.temperature,
                   top_k=args.top_k, seed=args.seed)
    print(args.prompt + tok.decode(out))
    return 0


def cmd_pack(args) -> int:
    model = load_model(args.model, device=args.device)
    pkg = EvermindPackage.from_model(model, args.name, version=args.version, fp16=args.fp16,
                                     card={"description": args.description or f"{args.name}: an evermind-vk TransformerLM"})
    pkg.to_file(args.out)
    print(f"wrote {args.out}: {pkg.manifest['paramCount']:,} parameters, checkpoint {len(pkg.checkpoint):,} bytes "
          f"({'f16' if args.fp16 else 'f32'}), checksum {pkg.manifest['checksum']:#010x}")
    return 0


def _open_any(path):
    """('package', EvermindPackage) or ('checkpoint', stored record) for a file; BlobError if neither."""
    with open(path, "rb") as f:
        raw = f.read()
    inner = framing.unframe(raw) if framing.is_framed(raw) else raw
    if inner[:4] == b"1MVE":
        return "package", EvermindPackage.from_blob(inner)
    if inner[:4] == b"EVCK" or inner[:1] == b"{":
        return "checkpoint", decode(raw)[1]
    raise FormatError(f"{path}: neither an .evermind package nor a checkpoint")


def cmd_inspect(args) -> int:
    kind, obj = _open_any(args.file)
    rows = []
    if kind == "package":
        m = obj.manifest
        for k, v in m.items():
            if k not in ("config", "card"):
                rows.append((k, v))
        for k, v in (m.get("config") or {}).items():
            rows.append((f"config.{k}", v))
        rows += [("checkpoint bytes", len(obj.checkpoint)), ("checkpoint fnv1a (actual)", fnv1a32(obj.checkpoint)),
                 ("codec bytes", len(obj.codec) if obj.codec else 0)]
        v = obj.validate()
        rows.append(("valid", "yes" if v["ok"] else "NO: " + "; ".join(v["errors"])))
    else:
        meta = obj.get("metadata") or {}
        for k, v in meta.items():
            rows.append((k, v))
        rows.append(("checkpointHash (actual)", checkpoint_hash(obj)))
    w = max(len(str(k)) for k, _ in rows)
    print(f"{args.file}: {kind}")
    for k, v in rows:
        print(f"  {str(k):<{w}}  {v}")
    return 0


def cmd_verify(args) -> int:
    try:
        kind, obj = _open_any(args.file)
        if kind == "package":
            v = obj.validate()
            if not v["ok"]:
                for e in v["errors"]:
                    print(f"{args.file}: {e}", file=sys.stderr)
                return 1
        else:
            verify_checkpoint(obj)
    except (BlobError, OSError) as e:
        print(f"{args.file}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"{args.file}: ok ({kind})")
    return 0


def version_line() -> str:
    """evermind-vk's version and the kp build it runs on (ours reports 0.9.0+evermind1)."""
    try:
        kp_version = version("kp")
    except PackageNotFoundError:
        kp_version = "not installed (run `bash ci/setup.sh`)"
    return f"evermind-vk {__version__} (kp {kp_version})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="evermind-vk", description="Train and run small models on Vulkan.")
    ap.add_argument("--version", action="version", version=version_line())
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("devices", help="list Vulkan devices and their capabilities").set_defaults(fn=cmd_devices)
    p = sub.add_parser("check", help="run a matmul on the device and check it against numpy")
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--device", default=None, help="index or name substring (default: EVERMIND_VK_DEVICE or 0)")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("train", help="train a small LM (default: on the embedded corpus) and sample from it")
    p.add_argument("--text", help="a UTF-8 text file to train on instead of the embedded corpus")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=128)
    p.add_argument("--time-limit", type=float, default=60.0,
                   help="stop training after this many seconds (0: none; the default keeps a lavapipe run under 2 minutes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/default")
    p.add_argument("--prompt", default="The ")
    p.add_argument("--sample-tokens", type=int, default=60)
    p.add_argument("--device", default=None)
    p.add_argument("--model", choices=["transformer", "evermind-lm", "moe"], default="transformer",
                   help="transformer (ours) or builderforce's evermind-lm / moe (written as .evermind)")
    p.set_defaults(fn=cmd_train)
    p = sub.add_parser("generate", help="sample from a model saved by `train` (.npz) or any text .evermind package")
    p.add_argument("--model", default="runs/default/model.npz")
    p.add_argument("--prompt", default="The ")
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None)
    p.set_defaults(fn=cmd_generate)
    p = sub.add_parser("pack", help="package a saved model as .evermind (EVM1, zstd-framed)")
    p.add_argument("--model", default="runs/default/model.npz")
    p.add_argument("--name", default="evermind-lm")
    p.add_argument("--version", default="1.0.0")
    p.add_argument("--description", default=None)
    p.add_argument("--fp16", action="store_true", help="store weights as f16 (round-to-nearest-even)")
    p.add_argument("--out", default="model.evermind")
    p.add_argument("--device", default=None)
    p.set_defaults(fn=cmd_pack)
    p = sub.add_parser("inspect", help="show an .evermind package's manifest, sizes, checksums (or a checkpoint's metadata)")
    p.add_argument("file")
    p.set_defaults(fn=cmd_inspect)
    p = sub.add_parser("verify", help="exit non-zero on any problem in an .evermind package or checkpoint")
    p.add_argument("file")
    p.set_defaults(fn=cmd_verify)
    add_video_parser(sub)
    args = ap.parse_args(argv)
    if getattr(args, "time_limit", None) == 0:
        args.time_limit = None
    try:
        return args.fn(args)
    except EvermindError as e:
        print(f"evermind-vk: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


# -- builderforce's models: train --model evermind-lm|moe, generate --model any.evermind ------------------
from .files import load as load_any  # noqa: E402
from .models import EvermindLM, EvermindLMConfig, MoEConfig, SharedExpertMoE  # noqa: E402
from .train import EvermindLMTrainer, MoETrainer  # noqa: E402


def cmd_train_builderforce(args) -> int:
    """Train builderforce's EvermindLM (next byte) or SharedExpertMoE (next byte's embedding from this
    byte's: a fixed seeded table) on the corpus with its trainer, write out/model.evermind, report."""
    dev = get_device(args.device)
    text = open(args.text, encoding="utf-8").read() if args.text else default_corpus()
    tok = ByteTokenizer()
    ids = np.asarray(tok.encode(text), np.int64)
    L, limit = args.seq_len, args.time_limit
    rng = np.random.default_rng(args.seed)
    if args.model == "evermind-lm":
        model = EvermindLM(EvermindLMConfig(256, args.d_model, args.layers, 3, args.d_ff, seed=args.seed), device=dev)
        trainer = EvermindLMTrainer(model, lr=args.lr, accum_steps=args.batch_size)
        chunks = [ids[s:s + L + 1].tolist() for s in range(0, len(ids) - L - 1, L)]
    else:
        model = SharedExpertMoE(MoEConfig(args.d_model, args.d_ff, 8, 2, seed=args.seed), device=dev)
        trainer = MoETrainer(model, lr=args.lr, batch_size=args.batch_size * L)
        table = np.random.default_rng(1234).standard_normal((256, args.d_model)).astype(np.float32)
        chunks = [ids[s:s + args.batch_size * L + 1] for s in range(0, len(ids) - args.batch_size * L - 1,
                                                                     args.batch_size * L)]
    print(f"device: {dev.info.name} | {args.model}: {model.num_parameters():,} parameters | {len(chunks)} chunks")
    order = rng.permutation(len(chunks))
    t0, losses, step = time.perf_counter(), [], 0
    group = args.batch_size if args.model == "evermind-lm" else 1
    for e in range(args.epochs):
        for i in range(0, len(order), group):
            part = [chunks[j] for j in order[i:i + group]]
            if args.model == "evermind-lm":
                loss = trainer.fit(part)[0]
            else:
                c = part[0]
                loss = trainer.fit(list(zip(table[c[:-1]], table[c[1:]])))[0]["loss"]
            losses.append(loss)
            step += 1
            if step % 10 == 0:
                print(f"epoch {e} step {step}: loss {np.mean(losses[-10:]):.4f} ({time.perf_counter() - t0:.0f}s)",
                      file=sys.stderr)
            if limit and time.perf_counter() - t0 > limit:
                break
        if limit and time.perf_counter() - t0 > limit:
            break
    k = max(1, len(losses) // 10)
    print(f"trained {len(losses)} steps in {time.perf_counter() - t0:.1f}s: loss {np.mean(losses[:k]):.3f} "
          f"(first {k}) -> {np.mean(losses[-k:]):.3f} (last {k})")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "model.evermind")
    EvermindPackage.from_model(model, name=f"evermind-vk-{args.model}", version="1.0.0").to_file(path)
    print(f"wrote {path}")
    if args.model == "evermind-lm":
        out = model.generate(tok.encode(args.prompt), args.sample_tokens, temperature=0.8, seed=args.seed + 1)
        print("sample: " + repr(args.prompt + tok.decode(out)))
    return 0


def cmd_generate_any(args) -> int:
    """generate --model any .evermind package (or .safetensors) holding a text model."""
    model = load_any(args.model, device=get_device(args.device))
    if isinstance(model, tuple):
        raise FormatError(f"{args.model} is a media package (EvermindLM + codec), not a text model")
    tok = ByteTokenizer()
    if isinstance(model, EvermindLM):
        if model.config.vocab_size < 256:
            raise FormatError(f"{args.model}: vocabulary of {model.config.vocab_size} is not the byte tokenizer's 256")
        out = model.generate(tok.encode(args.prompt), args.tokens, temperature=args.temperature, seed=args.seed or 1)
        print(args.prompt + tok.decode([t for t in out if t < 256]))
        return 0
    if not isinstance(model, TransformerLM):
        raise FormatError(f"{args.model} holds a {type(model).__name__}, which does not generate text")
    out = generate(model, tok.encode(args.prompt), max_new_tokens=args.tokens, temperature=args.temperature,
                   top_k=args.top_k, seed=args.seed)
    print(args.prompt + tok.decode(out))
    return 0


# -- video: VideoRVQ encode / decode (frames as PNG: a folder, or one horizontal strip) ---------------------
from .files import deserialize_codec, serialize_codec  # noqa: E402
from .io.atomic import atomic_write  # noqa: E402
from .models.video_rvq import VideoRVQCodec  # noqa: E402


def _read_frames(path: str, n_strip: int) -> list:
    import matplotlib.image as mpimg  # optional dependency
    files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.lower().endswith(".png")) \
        if os.path.isdir(path) else [path]
    imgs = [np.asarray(mpimg.imread(f), np.float32)[..., :3] for f in files]
    if not os.path.isdir(path):
        strip = imgs[0]
        if n_strip < 1 or strip.shape[1] % n_strip:
            raise FormatError(f"{path}: width {strip.shape[1]} is not {n_strip} equal frames (--frames)")
        w = strip.shape[1] // n_strip
        imgs = [strip[:, i * w:(i + 1) * w] for i in range(n_strip)]
    if not imgs:
        raise FormatError(f"{path}: no PNG frames")
    return imgs


def _write_frames(frames: list, out: str) -> None:
    import matplotlib.image as mpimg  # optional dependency
    if out.lower().endswith(".png"):
        mpimg.imsave(out, np.concatenate(frames, axis=1))
    else:
        os.makedirs(out, exist_ok=True)
        for i, f in enumerate(frames):
            mpimg.imsave(os.path.join(out, f"frame{i:04d}.png"), f)


def cmd_video(args) -> int:
    if args.action == "encode":
        frames = _read_frames(args.input, args.frames)
        H, W, C = frames[0].shape
        if args.codec and os.path.exists(args.codec):
            codec = deserialize_codec(open(args.codec, "rb").read())
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
        raise FormatError("video decode needs --codec FILE.vrq0")
    codec = deserialize_codec(open(args.codec, "rb").read())
    toks = json.loads(open(args.input).read())
    frames = codec.decode(toks)
    if not frames:
        raise FormatError(f"{args.input}: no frames in the token stream")
    _write_frames(frames, args.out)
    print(f"{len(toks)} tokens -> {len(frames)} frames; wrote {args.out}")
    return 0


def add_video_parser(sub) -> None:
    p = sub.add_parser("video", help="VideoRVQ: encode PNG frames (a folder or a strip) to tokens, or decode tokens")
    p.add_argument("action", choices=["encode", "decode"])
    p.add_argument("input", help="encode: a folder of PNGs or one horizontal strip; decode: a JSON token list")
    p.add_argument("--out", required=True, help="encode: tokens JSON; decode: a folder, or a .png strip")
    p.add_argument("--codec", help="VRQ0 file (encode: fitted and written here if absent)")
    p.add_argument("--frames", type=int, default=1, help="frames in an input strip")
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--levels", type=int, default=2)
    p.add_argument("--codebook", type=int, default=16)
    p.add_argument("--keyframe-interval", type=int, default=12)
    p.add_argument("--iterations", type=int, default=8)
    p.set_defaults(fn=cmd_video)


if __name__ == "__main__":
    sys.exit(main())
