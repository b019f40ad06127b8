"""The evermind-vk command."""
from __future__ import annotations

import argparse
import codecs
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
from .runtime.profiler import profile
from .train import ByteTokenizer, LRSchedule, Trainer, default_corpus, generate
from .train.plot import loss_curve_png

# Image models (issue 17).
from .models import ConvAE, ConvAEConfig  # noqa: E402
from .train import ImageTrainer, image_grid_png, shapes_dataset  # noqa: E402


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
    if getattr(args, "model", "lm") == "conv-ae":
        return cmd_train_image(args)
    dev = get_device(args.device)
    text = open(args.text, encoding="utf-8").read() if args.text else default_corpus()
    cfg = LMConfig(d_model=args.d_model, n_layers=args.layers, n_heads=args.heads, n_kv_heads=args.kv_heads,
                   d_ff=args.d_ff, max_seq_len=max(args.seq_len, 64), seed=args.seed)
    tok = ByteTokenizer()
    ids = tok.encode(text)
    # -- resumable runs (issue 14): a checkpoint under --out, saved every --save-every steps, at the end
    # and on SIGINT/SIGTERM (at the next step boundary); --resume continues it (same data and options).
    key = args.checkpoint or os.path.join(args.out, "trainer-checkpoint")
    os.makedirs(args.out, exist_ok=True)
    if args.resume:
        trainer = Trainer.from_checkpoint(key, device=dev, tokenizer=tok)
        model = trainer.model
        print(f"resuming {key} at step {trainer.global_step}")
    else:
        model = TransformerLM(cfg, device=dev)
        trainer = Trainer(model, tok, seed=args.seed)
    print(f"device: {dev.info.name} | corpus: {len(ids):,} bytes ({'--text ' + args.text if args.text else 'embedded default: Python stdlib docstrings'}) "
          f"| model: {model.num_parameters():,} parameters")
    schedule = None
    if args.lr_schedule != "constant" or args.warmup_steps:
        per_epoch = -(-(-(-(len(ids) - 1) // args.seq_len) // args.batch_size) // args.accum_steps)
        schedule = LRSchedule(type=args.lr_schedule, warmup_steps=args.warmup_steps,
                              total_steps=max(1, args.max_steps or per_epoch * args.epochs))
    t0 = time.perf_counter()
    losses = trainer.train(ids, epochs=1 if args.epochs is None else args.epochs, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                           max_grad_norm=args.max_grad_norm, progress=True, time_limit=args.time_limit,
                           on_epoch_end=lambda e, l, g: print(f"epoch {e}: mean loss {l:.4f}", file=sys.stderr),
                           schedule=schedule, accum_steps=args.accum_steps, max_steps=args.max_steps,
                           save_key=key, save_every=args.save_every, stop_on_signal=True)
    if trainer.interrupted is not None:
        print(f"interrupted by signal {trainer.interrupted} at step {trainer.global_step}; saved {key} "
              f"(continue with --resume)")
        return 128 + int(trainer.interrupted)
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


# -- image models (issue 17) ------------------------------------------------------------------------
def cmd_train_image(args) -> int:
    """Train a ConvAE on the seeded procedural image set; write its weights, the loss curve and a PNG
    grid of held-out images above their reconstructions."""
    dev = get_device(args.device)
    cfg = ConvAEConfig(image_size=args.image_size, seed=args.seed)
    model = ConvAE(cfg, device=dev)
    images = shapes_dataset(args.images + 16, cfg.image_size, cfg.channels, seed=args.seed)
    train_set, held_out = images[:args.images], images[args.images:]
    print(f"device: {dev.info.name} | data: {args.images} procedural {cfg.image_size}x{cfg.image_size} RGB images "
          f"(seed {args.seed}) | model: ConvAE, {model.num_parameters():,} parameters")
    trainer = ImageTrainer(model, lr=args.lr, max_grad_norm=args.max_grad_norm, seed=args.seed)
    before = trainer.evaluate(held_out, batch_size=16)
    t0 = time.perf_counter()
    epochs = args.epochs if args.epochs is not None else (10_000 if args.time_limit else 1)  # until the time limit
    trainer.train(train_set, epochs=epochs, batch_size=args.batch_size, time_limit=args.time_limit, progress=True)
    dt = time.perf_counter() - t0
    after = trainer.evaluate(held_out, batch_size=16)
    steps = [h["loss"] for h in trainer.history]
    print(f"trained {len(steps)} steps in {dt:.1f}s: held-out MSE {before:.4f} -> {after:.4f}")
    out = args.out if args.out != "runs/default" else "runs/conv-ae"
    os.makedirs(out, exist_ok=True)
    save_model(model, os.path.join(out, "model.npz"))  # weights + config JSON, as for the LM
    loss_curve_png(steps, os.path.join(out, "loss.png"))
    image_grid_png([held_out[:8], trainer.reconstruct(held_out[:8])], os.path.join(out, "reconstructions.png"))
    print(f"wrote {out}/model.npz, {out}/loss.png and {out}/reconstructions.png (held-out images above, reconstructions below)")
    return 0


def cmd_generate(args) -> int:
    """Stream a continuation of --prompt (text, through the byte tokenizer) to stdout, then tokens/s."""
    model = load_model(args.model, device=get_device(args.device))
    tok = ByteTokenizer()
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a byte at a time, multi-byte safe
    sys.stdout.write(args.prompt)
    sys.stdout.flush()

    def show(t):
        sys.stdout.write(dec.decode(bytes([t]) if 0 <= t < 256 else b""))
        sys.stdout.flush()

    stop = [int(x) for s in args.stop for x in tok.encode(s)[:1]]  # each --stop string: its first token
    t0 = time.perf_counter()
    out = generate(model, tok.encode(args.prompt), max_new_tokens=args.tokens, temperature=args.temperature,
                   top_k=args.top_k, seed=args.seed, top_p=args.top_p, repetition_penalty=args.repetition_penalty,
                   stop_tokens=stop, use_cache=not args.no_cache, on_token=show)
    dt = time.perf_counter() - t0
    sys.stdout.write(dec.decode(b"", final=True) + "\n")
    print(f"[{len(out)} tokens in {dt:.2f}s: {len(out) / max(dt, 1e-9):.1f} tokens/s"
          f"{', no KV cache' if args.no_cache else ''}]", file=sys.stderr)
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


def cmd_profile(args) -> int:
    """Record one training step of a TransformerLM (the `train` model flags), then print GPU time per
    kernel variant from Vulkan timestamps and the host time per step (evermind_vk.runtime.profiler)."""
    dev = get_device(args.device)
    cfg = LMConfig(d_model=args.d_model, n_layers=args.layers, n_heads=args.heads, n_kv_heads=args.kv_heads,
                   d_ff=args.d_ff, max_seq_len=max(args.seq_len, 64), seed=args.seed)
    model = TransformerLM(cfg, device=dev)
    tok = ByteTokenizer()
    need = args.batch_size * (args.seq_len + 1) * 2
    text = open(args.text, encoding="utf-8").read() if args.text else default_corpus()
    ids = tok.encode(text)[:need]
    trainer = Trainer(model, tok, seed=args.seed)
    trainer.train(ids, epochs=1, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                  max_grad_norm=args.max_grad_norm)  # records the step and runs it (pipelines built)
    prog = trainer.step_program(args.seq_len, args.batch_size, args.max_grad_norm)
    prof = profile(prog, repeats=args.repeats)
    tokens = args.batch_size * args.seq_len
    print(f"one training step: {model.num_parameters():,} parameters, batch {args.batch_size} x {args.seq_len} tokens, "
          f"{len(prog)} operations, one submit")
    print(prof.table())
    print(f"throughput: {tokens / (prof.host_ms / 1e3):,.0f} tokens/s (host time), "
          f"{tokens / (prof.gpu_ms / 1e3):,.0f} tokens/s (GPU time)")
    return 0


def _add_profile_parser(sub) -> None:
    p = sub.add_parser("profile", help="GPU time per kernel variant of one recorded training step")
    p.add_argument("--text", help="a UTF-8 text file for the sample batch (default: the embedded corpus)")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3, help="timed runs of the step (median per operation)")
    p.add_argument("--device", default=None)
    p.set_defaults(fn=cmd_profile)


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
    p.add_argument("--epochs", type=int, default=None,
                   help="default: 1 for lm; for conv-ae as many as --time-limit allows")
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
    p.add_argument("--save-every", type=int, default=0, help="save a resumable checkpoint every N steps")
    p.add_argument("--resume", action="store_true", help="continue the run saved under --checkpoint")
    p.add_argument("--checkpoint", default=None, help="checkpoint path (default: OUT/trainer-checkpoint)")
    p.add_argument("--accum-steps", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    p.add_argument("--lr-schedule", default="constant", choices=("constant", "cosine", "step_decay"))
    p.add_argument("--warmup-steps", type=int, default=0)
    # Image models (issue 17): `--model conv-ae` trains a conv autoencoder on generated images instead.
    p.add_argument("--model", choices=("lm", "conv-ae"), default="lm",
                   help="lm: the TransformerLM on text; conv-ae: a conv autoencoder on procedural images")
    p.add_argument("--images", type=int, default=256, help="conv-ae: training images")
    p.add_argument("--image-size", type=int, default=16, help="conv-ae: image side (a multiple of 4)")
    p.set_defaults(fn=cmd_train)
    p = sub.add_parser("generate", help="sample from a model saved by `train`")
    p.add_argument("--model", default="runs/default/model.npz")
    p.add_argument("--prompt", default="The ")
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None)
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling: keep this much probability mass")
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--stop", action="append", default=[], help="stop at this character (repeatable)")
    p.add_argument("--no-cache", action="store_true", help="re-run the whole context per token (no KV cache)")
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
    _add_profile_parser(sub)
    args = ap.parse_args(argv)
    if getattr(args, "time_limit", None) == 0:
        args.time_limit = None
    try:
        return args.fn(args)
    except EvermindError as e:
        print(f"evermind-vk: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
