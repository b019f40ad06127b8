"""`evermind-vk pack`, `inspect` and `verify`: .evermind packages, checkpoints and model files."""
from __future__ import annotations

import argparse
import os

from ..errors import EvermindError
from ..files import mbjs_errors, read_config
from ..io import open_blob
from ..io.atomic import atomic_write
from ..io.checkpoint import checkpoint_hash
from ..io.checkpoint import verify as verify_checkpoint
from ..io.layouts import nonfinite_count
from ..io.package import EvermindPackage, fnv1a32
from ..models import HybridMambaConfig
from .args import add_device
from .common import describe, error, load_model

MODEL_HELP = ("a .safetensors (with config metadata), .npz (a ConvAE's with config.json beside it) or .evermind "
              "model file, a run directory, or builderforce's bare EVL0 / MoE0 / MBJS weights (MBJS: with --config "
              "or config.json beside it)")


def cmd_pack(args) -> int:
    """Write a saved model as an .evermind package (zstd-framed, or the raw EVM1 blob)."""
    model = load_model(args.model, device=args.device, config=args.config)
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
    """('package', EvermindPackage), ('checkpoint', stored record) or ('raw', (layout, parsed)) for a file;
    BlobError if none (io.open_blob: a regular file, read once under the size and ratio caps)."""
    d = open_blob(path)
    if d.kind == "package":
        return "package", d.package
    if d.kind == "checkpoint":
        return "checkpoint", d.stored
    return "raw", (d.layout, d.parsed)


def _raw_problems(path: str, layout: str, parsed: dict, config) -> tuple[list, list]:
    """(rows, problems) of a bare builderforce file: its header, and what is wrong with it (NaN/Inf weights;
    an MBJS file's sizes against its config, given or config.json beside it, when there is one)."""
    if layout == "VRQ0":
        return [(k, v) for k, v in parsed.items() if k not in ("intra", "inter")], []
    arrays = parsed["arrays"] if layout == "MBJS" else list(parsed["params"].values())
    rows = [("parameters", f"{len(arrays)} tensors, {sum(a.size for a in arrays):,} values")]
    if layout == "MBJS":
        rows += [("version", parsed["version"]), ("fp16", parsed["fp16"]),
                 ("layer types", parsed["layer_types"] or "(v1: all mamba1)")]
    else:
        rows += [(f"config.{k}", v) for k, v in parsed["config"].items()]
    rows.append(("crc trailer", "yes (checked)" if parsed.get("crc") else "none"))
    bad = sum(nonfinite_count(a) for a in arrays)
    problems = [f"{bad} NaN/Inf weights"] if bad else []
    if layout == "MBJS":
        cfg = read_config(config, path)
        if cfg is None:
            rows.append(("config", "none (give --config or put config.json beside the file to check sizes)"))
        else:
            try:
                problems += mbjs_errors(HybridMambaConfig.from_dict(cfg), parsed)
            except (TypeError, ValueError) as e:
                problems.append(f"invalid HybridMambaModel config: {e}")
            rows.append(("matches config", "yes" if not problems else "NO"))
    return rows, problems


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
    if kind == "raw":
        rows, problems = _raw_problems(args.file, obj[0], obj[1], args.config)
        rows = [("layout", obj[0])] + rows + [("valid", "yes" if not problems else "NO: " + "; ".join(problems))]
    elif kind == "package":
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
    print(f"{args.file}: {kind if kind != 'raw' else 'builderforce ' + obj[0]}")
    for k, v in rows:
        print(f"  {str(k):<{w}}  {v}")
    return 0


def cmd_verify(args) -> int:
    """Exit 1 (one error line) on any problem with the file, 0 when it checks out."""
    try:
        if str(args.file).endswith((".safetensors", ".npz")) or os.path.isdir(args.file):
            model = load_model(args.file)  # every check the loader makes: config, tensors, NaN/Inf
            print(f"{args.file}: ok (model {type(model).__name__}, {model.num_parameters():,} parameters)")
            return 0
        kind, obj = open_any(args.file)
        if kind == "raw":
            problems = _raw_problems(args.file, obj[0], obj[1], args.config)[1]
            if problems:
                error(f"{args.file}: " + "; ".join(problems))
                return 1
            kind = obj[0]
        elif kind == "package":
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
    p.add_argument("--config", default=None, help="a JSON config for builderforce's bare weight files (MBJS needs one)")
    add_device(p)
    p.set_defaults(fn=cmd_pack)
    p = sub.add_parser("inspect", help="show a package's manifest, sizes, checksums, a checkpoint's metadata, "
                       "or a model file's config", formatter_class=fmt)
    p.add_argument("file", help=".evermind, checkpoint, .safetensors, .npz, or builderforce's EVL0/MoE0/MBJS/VRQ0")
    p.add_argument("--config", default=None, help="an MBJS file's HybridMambaModel config (JSON), to check its sizes")
    p.set_defaults(fn=cmd_inspect)
    p = sub.add_parser("verify", help="exit 1 on any problem in an .evermind package, checkpoint, model file or "
                       "builderforce file", formatter_class=fmt)
    p.add_argument("file", help=".evermind package, checkpoint, .safetensors, .npz, a run directory, or builderforce's "
                   "EVL0/MoE0/MBJS/VRQ0")
    p.add_argument("--config", default=None, help="an MBJS file's HybridMambaModel config (JSON), to check its sizes")
    p.set_defaults(fn=cmd_verify)
