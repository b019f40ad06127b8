"""The evermind-vk command."""
from __future__ import annotations

import argparse
import os
import sys
import time
from importlib.metadata import PackageNotFoundError, version

import numpy as np

from . import __version__
from .errors import BlobError, EvermindError, FormatError
from .files import load, load_model, save_model
from .io import framing
from .io.checkpoint import checkpoint_hash, decode
from .io.checkpoint import verify as verify_checkpoint
from .io.package import EvermindPackage, fnv1a32
from .models import HybridMambaConfig, HybridMambaModel, LMConfig, TransformerLM
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
    dev = get_device(args.device)
    text = open(args.text, encoding="utf-8").read() if args.text else default_corpus()
    if args.model == "mamba":  # HybridMambaModel (issue 12): --layers is a layer-type list or a count of mamba1
        spec = str(args.layers)
        layers = ("mamba1",) * int(spec) if spec.isdigit() else tuple(t.strip() for t in spec.split(",") if t.strip())
        try:
            mcfg = HybridMambaConfig(vocabSize=256, dModel=args.d_model, numLayers=len(layers), layers=layers,
                                     nHeads=args.heads, seed=args.seed)
        except ValueError as e:
            raise EvermindError(f"--layers {spec}: {e}") from e
        model = HybridMambaModel(mcfg, device=dev)
    else:
        if not str(args.layers).isdigit():
            raise EvermindError(f"--layers {args.layers}: a layer count for --model transformer")
        cfg = LMConfig(d_model=args.d_model, n_layers=int(args.layers), n_heads=args.heads, n_kv_heads=args.kv_heads,
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
    if args.model == "mamba":
        path = os.path.join(args.out, "model.evermind")
        EvermindPackage.from_model(model, "hybrid-mamba").to_file(path)
    else:
        path = os.path.join(args.out, "model.npz")
        save_model(model, path)
    loss_curve_png(steps, os.path.join(args.out, "loss.png"))
    print(f"wrote {path} and {os.path.join(args.out, 'loss.png')}")
    prompt = args.prompt
    gen = model.generate if args.model == "mamba" else (lambda *a, **k: generate(model, *a, **k))
    out = gen(tok.encode(prompt), max_new_tokens=args.sample_tokens, temperature=0.8, top_k=20, seed=args.seed)
    print("sample: " + repr(prompt + tok.decode(out)))
    return 0


def cmd_generate(args) -> int:
    model = load(args.model, device=get_device(args.device))
    tok = ByteTokenizer()
    # A HybridMambaModel generates from its recurrent state (its own generate); others re-run the context.
    gen = model.generate if hasattr(model, "generate") else (lambda *a, **k: generate(model, *a, **k))
    out = gen(tok.encode(args.prompt), max_new_tokens=args.tokens, temperature=args.temperature,
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
    p.add_argument("--model", choices=("transformer", "mamba"), default="transformer",
                   help="transformer (TransformerLM) or mamba (HybridMambaModel; saved as model.evermind)")
    p.add_argument("--layers", default="2",
                   help="layer count; for --model mamba also a list of layer types, e.g. mamba1,mamba2,attention")
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
    p.set_defaults(fn=cmd_train)
    p = sub.add_parser("generate", help="sample from a model saved by `train`")
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
