"""`evermind-vk pack`, `inspect` and `verify`: .evermind packages, checkpoints and model files."""
from __future__ import annotations

import argparse
import os

from ..errors import EvermindError
from ..io import open_blob
from ..io.atomic import atomic_write
from ..io.checkpoint import checkpoint_hash
from ..io.checkpoint import verify as verify_checkpoint
from ..io.package import EvermindPackage, fnv1a32
from .args import add_device
from .common import describe, error, load_model

MODEL_HELP = "a .safetensors (with config metadata), .npz or .evermind model file, or a run directory"


def cmd_pack(args) -> int:
    """Write a saved model as an .evermind package (zstd-framed, or the raw EVM1 blob)."""
    model = load_model(args.model, device=args.device)
    pkg = EvermindPackage.from_model(model, args.name, version=args.version, fp16=args.fp16,
                                     card={"description": args.description
                                           or f"{args.name}: an evermind-vk {type(model).__name__}"})
    if args.raw:  # the EVM1 bytes themselves, as builderforce reads them (no zstd frame)
        atomic_write(args.out, pkg.to_blob())
    else:
        pkg.to_file(args.out)
    print(f"wrote {args.out}: {pkg.manifest['paramCount']:,} parameters, checkpoint {len(pkg.checkpoint):,} bytes "
          f"({'f16' if args.fp16 else 'f32'}{', raw EVM1' if args.raw else ', zstd-framed'}), "
          f"checksum {pkg.manifest['checksum']:#010x}")
    return 0


def open_any(path):
    """('package', EvermindPackage) or ('checkpoint', stored record) for a file; BlobError if neither
    (io.open_blob: a regular file, read once under the size and ratio caps)."""
    d = open_blob(path)
    return ("package", d.package) if d.kind == "package" else ("checkpoint", d.stored)


def cmd_inspect(args) -> int:
    """Print a package's manifest, a checkpoint's metadata or a model file's config, one row a field."""
    if str(args.file).endswith((".safetensors", ".npz")) or os.path.isdir(args.file):
        model = load_model(args.file)
        print(f"{args.file}: model ({type(model).__name__}, {model.num_parameters():,} parameters)")
        cfg = model.config.to_dict()
        w = max(len(k) for k in cfg) + len("config.")
        for k, v in cfg.items():
            print(f"  {'config.' + k:<{w}}  {v}")
        return 0
    kind, obj = open_any(args.file)
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
    """Exit 1 (one error line) on any problem with the file, 0 when it checks out."""
    try:
        kind, obj = open_any(args.file)
        if kind == "package":
            v = obj.validate()
            if not v["ok"]:
                error(f"{args.file}: " + "; ".join(v["errors"]))
                return 1
        else:
            verify_checkpoint(obj)
    except (EvermindError, OSError, ValueError) as e:
        error(f"{args.file}: {describe(e)}")
        return 1
    print(f"{args.file}: ok ({kind})")
    return 0



def add_parsers(sub) -> None:
    """The `pack`, `inspect` and `verify` subcommands."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    p = sub.add_parser("pack", help="package a saved model as .evermind (EVM1, zstd-framed)", formatter_class=fmt)
    p.add_argument("--model", default="runs/default", help=MODEL_HELP)
    p.add_argument("--name", default="evermind-lm", help="package name")
    p.add_argument("--version", default="1.0.0", help="package version")
    p.add_argument("--description", default=None, help="model card description (default: NAME: an evermind-vk TransformerLM)")
    p.add_argument("--fp16", action="store_true", help="store weights as f16 (round-to-nearest-even)")
    p.add_argument("--raw", action="store_true",
                   help="write the raw EVM1 blob builderforce reads (default: one zstd frame around it)")
    p.add_argument("--out", default="model.evermind", help="package file to write")
    add_device(p)
    p.set_defaults(fn=cmd_pack)
    p = sub.add_parser("inspect", help="show a package's manifest, sizes, checksums, a checkpoint's metadata, "
                       "or a model file's config", formatter_class=fmt)
    p.add_argument("file", help=".evermind, checkpoint, .safetensors or .npz")
    p.set_defaults(fn=cmd_inspect)
    p = sub.add_parser("verify", help="exit 1 on any problem in an .evermind package or checkpoint", formatter_class=fmt)
    p.add_argument("file", help=".evermind package or checkpoint")
    p.set_defaults(fn=cmd_verify)
