"""The evermind-vk command."""
from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import io
import json
import math
import os
import struct
import sys
import tempfile
import time
import zipfile
from importlib.metadata import PackageNotFoundError, version

import numpy as np

from . import __version__
from .errors import DistributedError, EvermindError, FormatError, LimitError
from .files import export_safetensors, lm_param_shapes, load, load_codec
from .io.atomic import atomic_write
from .io import open_blob
from .io.checkpoint import checkpoint_hash
from .io.regular import read_regular
from .io.checkpoint import verify as verify_checkpoint
from .io.package import EvermindPackage, fnv1a32
from .models import ConvAE, ConvAEConfig, HybridMambaConfig, HybridMambaModel, LMConfig, TransformerLM
from .ops import matmul
from .files import save_model
from .runtime import devices, get_device, tensor
from .runtime.profiler import profile
from .train import ByteTokenizer, LRSchedule, Trainer, build_chunks, default_corpus, generate
from .train.capacity import check_fits
from .train.distributed import RANK_ERROR_ENV, World, spawn
from .train.image import ImageTrainer, image_grid_png, shapes_dataset
from .train.plot import loss_curve_png, plot_losses, write_losses_csv
from .train.trainer import BF16_BLOCKED


def cmd_devices(args) -> int:
    for d in devices():
        feats = ", ".join(k for k, v in d.features.items() if v) or "none"
        print(f"[{d.index}] {d.name} ({d.type}) subgroup={d.subgroup_size} shared={d.shared_memory} B "
              f"f16={'yes' if d.f16 else 'no'} coopmat={'yes' if d.coopmat else 'no'}\n    features: {feats}")
    return 0


def cmd_check(args) -> int:
    """Run matmul on the device and compare with numpy (float64), saying what it does as it goes."""
    say = _say
    say(f"opening Vulkan device {args.device if args.device is not None else '(default)'} ...")
    dev = get_device(args.device)
    say(f"device: {dev.info.name} ({dev.info.type})")
    rng = np.random.default_rng(0)
    n = args.size
    ok = True
    for dtype in ("f32", "f16"):
        if dtype == "f16" and not dev.info.f16:
            say(f"matmul {dtype}: skipped ({dev.info.name} has no 16-bit storage)")
            continue
        np_dt = np.float16 if dtype == "f16" else np.float32
        a = rng.standard_normal((n, n)).astype(np_dt)
        b = rng.standard_normal((n, n)).astype(np_dt)
        ta, tb = tensor(a, device=dev), tensor(b, device=dev)
        say(f"matmul {dtype} {n}x{n}x{n}: building the pipeline (the first run on lavapipe can take a minute) ...")
        t0 = time.perf_counter()
        matmul(ta, tb).numpy()  # warm-up: pipeline creation
        say(f"matmul {dtype}: pipeline ready in {time.perf_counter() - t0:.1f}s; timing one product ...")
        t0 = time.perf_counter()
        got = matmul(ta, tb).numpy().astype(np.float64)
        dt = time.perf_counter() - t0
        want = a.astype(np.float64) @ b.astype(np.float64)
        rel = np.abs(got - want).max() / np.abs(want).max()
        tol = 1e-5 if dtype == "f32" else 2e-3
        ok &= rel <= tol
        say(f"matmul {dtype} {n}x{n}x{n} on {dev.info.name}: max rel. error {rel:.2e} "
            f"({'ok' if rel <= tol else 'FAIL'}, tol {tol:g}), {2 * n**3 / dt / 1e9:.2f} GFLOP/s incl. readback")
    return 0 if ok else 1


def _say(msg: str) -> None:
    print(msg, flush=True)


def _read_text(path: str) -> str:
    """A training text: a readable UTF-8 regular file (OSError / UnicodeDecodeError name the file)."""
    raw = bytes(read_regular(path, "--text file"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"--text {path}: not UTF-8 text (byte {e.start}: {raw[e.start:e.start + 1]!r}); "
                       "convert it first, e.g. iconv -f latin1 -t utf-8") from e


def _check_out_dir(out: str, names: list[str]) -> None:
    """Make sure every output can be written BEFORE training (so a bad --out loses no training)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise CliError(f"--out {out}: exists and is not a directory")
    os.makedirs(out, exist_ok=True)
    for name in names:
        p = os.path.join(out, name)
        if os.path.exists(p) and not os.path.isfile(p):
            raise CliError(f"--out {out}: {name} exists and is not a regular file")
        if os.path.exists(p) and not os.access(p, os.W_OK):
            raise CliError(f"--out {out}: {name} exists and is not writable")
    try:  # the directory itself must take new files (the atomic writes create temporaries there)
        fd, probe = tempfile.mkstemp(prefix=".evermind-vk-probe-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise CliError(f"--out {out}: cannot create files there ({e.strerror})") from e


HELD_OUT = 0.05  # the last 5% of the corpus is held out to measure perplexity before and after training
HELD_OUT_MAX = 8_192  # bytes at most (keeps the two evaluations to a few seconds each on lavapipe)


def cmd_train(args) -> int:
    """Train a TransformerLM (default: the embedded corpus), save it, plot the loss, print a sample."""
    if args.precision != "f32" and args.model != "lm":
        raise CliError(f"--precision {args.precision}: mixed precision is implemented for --model lm only")
    # Data-parallel: --nproc N launches N ranks running this command (or torchrun set WORLD_SIZE etc.).
    world = World.from_env() if "WORLD_SIZE" in os.environ else None
    if (args.nproc > 1 or world is not None) and args.model != "lm":
        raise CliError(f"--nproc / WORLD_SIZE: data-parallel training is for --model lm, not {args.model}")
    if world is not None and args.nproc > 1 and args.nproc != world.size:
        raise CliError(f"--nproc {args.nproc} but WORLD_SIZE={world.size} in the environment")
    _check_prompt(args.prompt)
    if args.model == "lm" and str(args.layers).isdigit() and not args.resume:  # before spawning or allocating
        check_fits(lm_param_shapes(_train_config(args)), None, "--d-model/--layers/--d-ff", ranks=args.nproc)
    if world is None and args.nproc > 1:
        _check_out_dir(args.out, [])
        key = args.checkpoint or os.path.join(args.out, "trainer-checkpoint")
        try:
            return spawn(args.argv, args.nproc, log_dir=args.out)
        except DistributedError as e:
            if os.path.exists(key):
                raise CliError(f"{e}; checkpoints saved before are kept: continue with --resume ({key})") from e
            raise
    if args.model == "conv-ae":
        return cmd_train_image(args)
    if args.model == "mamba":
        return cmd_train_mamba(args)
    if not str(args.layers).isdigit() or int(args.layers) < 1:
        raise CliError(f"--layers {args.layers}: a layer count (a list of layer types is for --model mamba)")
    args.layers = int(args.layers)
    lead = world is None or world.rank == 0  # rank 0 alone prints and writes files (every rank evaluates a share)
    try:
        if not lead:
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                return _cmd_train_lm(args, world, lead)
        return _cmd_train_lm(args, world, lead)
    finally:
        if world is not None:  # leave the process group before exit (see distributed._destroy_at_exit)
            world.close()


def _check_prompt(prompt: str) -> None:
    """--prompt must be encodable by the byte tokenizer (UTF-8): checked before any training."""
    try:
        ByteTokenizer().encode(prompt)
    except UnicodeError as e:
        raise CliError(f"--prompt {prompt!r}: cannot be encoded as UTF-8 ({e.reason}); "
                       "pass text your terminal encodes as UTF-8") from e


def _train_config(args) -> LMConfig:
    return LMConfig(d_model=args.d_model, n_layers=int(args.layers), n_heads=args.heads, n_kv_heads=args.kv_heads,
                    d_ff=args.d_ff, max_seq_len=max(args.seq_len, 64), seed=args.seed)


def _stopper(args, trainer) -> str:
    """Which flag ended a run before its planned steps."""
    return f"--max-steps {args.max_steps}" if args.max_steps and trainer.global_step >= args.max_steps else "--time-limit"


def _cmd_train_lm(args, world, lead: bool) -> int:
    if args.model in ("evermind-lm", "moe"):
        return cmd_train_builderforce(args)
    if args.precision == "bf16":
        raise CliError(f"--precision bf16: {BF16_BLOCKED.split(': ', 1)[1]}")
    epochs = 1 if args.epochs is None else args.epochs
    # Everything that can be checked is checked before the first step.
    outputs = ["model.safetensors", "config.json", "loss.png", "losses.csv"] + (["model.evermind"] if args.package else [])
    text = _read_text(args.text) if args.text else default_corpus()
    tok = ByteTokenizer()
    ids = np.asarray(tok.encode(text))
    if ids.size < 2:
        raise CliError(f"--text {args.text}: {ids.size} bytes; need at least 2 (one next-token pair)"
                       if args.text else "the embedded corpus is empty")
    cfg = _train_config(args)
    n_held = min(int(ids.size * HELD_OUT), HELD_OUT_MAX) if ids.size >= 40 else 0
    train_ids, held = (ids[:-n_held], ids[-n_held:]) if n_held >= 2 else (ids, None)
    _check_out_dir(args.out, outputs)
    dev = get_device(args.device if args.device is not None or world is None else world.device())
    # Resumable runs: a checkpoint under --out, saved every --save-every steps, at the end and on
    # SIGINT/SIGTERM (at the next step boundary); --resume continues it (same data and options).
    key = args.checkpoint or os.path.join(args.out, "trainer-checkpoint")
    if args.resume:
        trainer = Trainer.from_checkpoint(key, device=dev, tokenizer=tok, world=world)
        model = trainer.model
        if trainer.precision != args.precision:
            raise CliError(f"--resume: {key} was trained with --precision {trainer.precision}, not {args.precision}")
        print(f"resuming {key} at step {trainer.global_step}", flush=True)
    else:
        check_fits(lm_param_shapes(cfg), dev, "--d-model/--layers/--d-ff")  # before allocating anything
        model = TransformerLM(cfg, device=dev)
        trainer = Trainer(model, tok, seed=args.seed, world=world, precision=args.precision)
    print(f"device: {dev.info.name} | corpus: {ids.size:,} bytes "
          f"({'--text ' + args.text if args.text else 'embedded default: Python stdlib docstrings'}; "
          f"{'last ' + format(held.size, ',') + ' held out' if held is not None else 'too short to hold any out'}) "
          f"| model: {model.num_parameters():,} parameters"
          + (f" | data-parallel: {world.size} ranks x batch {args.batch_size}" if world else ""), flush=True)
    eval_len = min(args.seq_len, model.config.max_seq_len)
    t_eval = time.perf_counter()
    # every rank evaluates its share of the held-out batches (Trainer.evaluate all-reduces the sums)
    ppl_before = trainer.evaluate(held, seq_len=eval_len, batch_size=args.batch_size) if held is not None else None
    t_eval = time.perf_counter() - t_eval
    batches_per_epoch = -(-len(build_chunks(train_ids, args.seq_len)) // (args.batch_size * (world.size if world else 1)))
    steps_per_epoch = -(-batches_per_epoch // args.accum_steps)  # optimizer steps (history entries) per epoch
    planned = steps_per_epoch * epochs
    schedule = None
    if args.lr_schedule != "constant" or args.warmup_steps:
        schedule = LRSchedule(type=args.lr_schedule, warmup_steps=args.warmup_steps,
                              total_steps=max(1, args.max_steps or -(-batches_per_epoch * epochs // args.accum_steps)))

    def epoch_done(e, loss, _norm):
        if not lead:
            return
        run = sum(1 for h in trainer.history if h["epoch"] == e)
        if run < steps_per_epoch:
            print(f"epoch {e}: mean loss over the {run} of {steps_per_epoch} steps run {loss:.4f} "
                  f"(stopped by {_stopper(args, trainer)})", file=sys.stderr, flush=True)
        else:
            print(f"epoch {e}: mean loss {loss:.4f} ({run} steps)", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    trainer.train(train_ids, epochs=epochs, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                  max_grad_norm=args.max_grad_norm, progress=lead, time_limit=args.time_limit,
                  on_epoch_end=epoch_done, schedule=schedule, accum_steps=args.accum_steps,
                  max_steps=args.max_steps, save_key=key, save_every=args.save_every, stop_on_signal=True)
    if trainer.interrupted is not None:
        print(f"interrupted by signal {trainer.interrupted} at step {trainer.global_step}; saved {key} "
              f"(continue with --resume)", flush=True)
        return 128 + int(trainer.interrupted)
    dt = time.perf_counter() - t0
    ppl_after = trainer.evaluate(held, seq_len=eval_len, batch_size=args.batch_size) if held is not None else None
    if not lead:
        return 0
    steps = [h["loss"] for h in trainer.history]
    k = max(1, len(steps) // 10)
    how = (f"training stopped by {_stopper(args, trainer)} after {len(steps)} of {planned} steps" if len(steps) < planned
           else f"trained all {planned} steps ({epochs} epoch{'s' if epochs > 1 else ''})")
    print(f"{how} in {dt:.1f}s: loss {np.mean(steps[:k]):.3f} (mean of the first {k} steps) -> "
          f"{np.mean(steps[-k:]):.3f} (mean of the last {k})")
    if held is not None:
        print(f"held-out perplexity (last {held.size:,} bytes, never trained on): {ppl_before:.2f} before training "
              f"-> {ppl_after:.2f} after (a uniform guess over 256 bytes: 256; {t_eval:.1f}s per evaluation)")
    paths = {n: os.path.join(args.out, n) for n in outputs}
    export_safetensors(model, paths["model.safetensors"])
    atomic_write(paths["config.json"], (json.dumps(model.config.to_dict(), indent=2, sort_keys=True) + "\n").encode())
    write_losses_csv(trainer.history, paths["losses.csv"])
    backend = plot_losses(trainer.history, paths["loss.png"],
                          title=f"evermind-vk train: {model.num_parameters():,} parameters on {dev.info.name}",
                          note=f"{how}, {dt:.0f}s; batch {args.batch_size} x {args.seq_len} tokens, lr {args.lr:g}")
    if backend != "matplotlib":
        print("loss.png: matplotlib is not installed, so the plot is the plain fallback (no axis labels or "
              "numbers); install the `plot` extra (pip install 'evermind-vk[plot]') for a readable one",
              file=sys.stderr)
    if args.package:
        pkg = EvermindPackage.from_model(model, "evermind-lm", card={"description": "an evermind-vk TransformerLM"})
        pkg.to_file(paths["model.evermind"])
    print("wrote " + ", ".join(paths[n] for n in outputs))
    prompt = args.prompt
    out = generate(model, tok.encode(prompt), max_new_tokens=args.sample_tokens, temperature=0.8, top_k=20,
                   seed=args.seed)
    print("sample: " + repr(prompt + tok.decode(out)))
    return 0


# -- image models (issue 17) ------------------------------------------------------------------------
def cmd_train_image(args) -> int:
    """Train a ConvAE on the seeded procedural image set; write its weights, the loss curve and a PNG
    grid of held-out images above their reconstructions."""
    _check_out_dir(args.out, ["model.npz", "loss.png", "reconstructions.png"])
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
    out = args.out
    save_model(model, os.path.join(out, "model.npz"))  # weights + config JSON, as for the LM
    loss_curve_png(steps, os.path.join(out, "loss.png"))
    image_grid_png([held_out[:8], trainer.reconstruct(held_out[:8])], os.path.join(out, "reconstructions.png"))
    print(f"wrote {out}/model.npz, {out}/loss.png and {out}/reconstructions.png (held-out images above, reconstructions below)")
    return 0


def _load_model(path: str, device=None):
    """Any model file we read (.safetensors, .npz, .evermind, or a run directory holding
    model.safetensors or model.npz), with unreadable files as one typed error."""
    if os.path.isdir(path):
        for name in ("model.safetensors", "model.npz", "model.evermind"):
            if os.path.isfile(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            raise IsADirectoryError(errno.EISDIR, "is a directory with no model.safetensors, model.npz or "
                                    "model.evermind", path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    try:
        return load(path, device=device)
    except EvermindError as e:
        if str(path) in str(e):
            raise
        raise type(e)(f"{path}: {e}") from e  # name the file
    except OSError:
        raise
    except (ValueError, KeyError, EOFError, zipfile.BadZipFile, struct.error) as e:
        raise FormatError(f"{path}: not a model file we can read ({type(e).__name__}: {e})") from e


def cmd_generate(args) -> int:
    """Stream a continuation of --prompt (text, through the byte tokenizer) to stdout, then tokens/s."""
    model = _load_model(args.model, device=get_device(args.device))
    tok = ByteTokenizer()
    if isinstance(model, tuple):
        raise FormatError(f"{args.model} is a media package (EvermindLM + codec), not a text model")
    if isinstance(model, HybridMambaModel):  # O(1) work per token from its recurrent state
        out = model.generate(tok.encode(args.prompt), max_new_tokens=args.tokens, temperature=args.temperature,
                             top_k=args.top_k, seed=args.seed)
        print(args.prompt + tok.decode(out))
        return 0
    if isinstance(model, EvermindLM):
        if model.config.vocab_size < 256:
            raise FormatError(f"{args.model}: vocabulary of {model.config.vocab_size} is not the byte tokenizer's 256")
        out = model.generate(tok.encode(args.prompt), args.tokens, temperature=args.temperature, seed=args.seed or 1)
        print(args.prompt + tok.decode([t for t in out if t < 256]))
        return 0
    if not isinstance(model, TransformerLM):
        raise FormatError(f"{args.model} holds a {type(model).__name__}, which does not generate text")
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
    model = _load_model(args.model, device=args.device)
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


def _open_any(path):
    """('package', EvermindPackage) or ('checkpoint', stored record) for a file; BlobError if neither
    (io.open_blob: a regular file, read once under the size and ratio caps)."""
    d = open_blob(path)
    return ("package", d.package) if d.kind == "package" else ("checkpoint", d.stored)


def cmd_inspect(args) -> int:
    if str(args.file).endswith((".safetensors", ".npz")) or os.path.isdir(args.file):
        model = _load_model(args.file)
        print(f"{args.file}: model ({type(model).__name__}, {model.num_parameters():,} parameters)")
        cfg = model.config.to_dict()
        w = max(len(k) for k in cfg) + len("config.")
        for k, v in cfg.items():
            print(f"  {'config.' + k:<{w}}  {v}")
        return 0
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
    """Exit 1 (one error line) on any problem with the file, 0 when it checks out."""
    try:
        kind, obj = _open_any(args.file)
        if kind == "package":
            v = obj.validate()
            if not v["ok"]:
                _error(f"{args.file}: " + "; ".join(v["errors"]))
                return 1
        else:
            verify_checkpoint(obj)
    except (EvermindError, OSError, ValueError) as e:
        _error(f"{args.file}: {_describe(e)}")
        return 1
    print(f"{args.file}: ok ({kind})")
    return 0


def cmd_profile(args) -> int:
    """Record one training step of a TransformerLM (the `train` model flags), then print GPU time per
    kernel variant from Vulkan timestamps and the host time per step (evermind_vk.runtime.profiler)."""
    dev = get_device(args.device)
    cfg = _train_config(args)
    model = TransformerLM(cfg, device=dev)
    tok = ByteTokenizer()
    need = args.batch_size * (args.seq_len + 1) * 2
    text = _read_text(args.text) if args.text else default_corpus()
    ids = tok.encode(text)[:need]
    trainer = Trainer(model, tok, seed=args.seed, precision=args.precision)
    trainer.train(ids, epochs=1, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                  max_grad_norm=args.max_grad_norm)  # records the step and runs it (pipelines built)
    prog = trainer.step_program(args.seq_len, args.batch_size, args.max_grad_norm)
    prof = profile(prog, repeats=args.repeats, serialize=args.serialize)
    tokens = args.batch_size * args.seq_len
    print(f"one training step ({args.precision}): {model.num_parameters():,} parameters, batch {args.batch_size} x "
          f"{args.seq_len} tokens, {len(prog)} operations, one submit")
    print(prof.table())
    if args.by_shape:
        print()
        print(prof.table(by="shape", top=args.by_shape))
    print(f"throughput: {tokens / (prof.host_ms / 1e3):,.0f} tokens/s (host time), "
          f"{tokens / (prof.gpu_ms / 1e3):,.0f} tokens/s (GPU time)")
    return 0


def _add_profile_parser(sub) -> None:
    p = sub.add_parser("profile", help="GPU time per kernel variant of one recorded training step",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--text", help="a UTF-8 text file for the sample batch (default: the embedded corpus)")
    p.add_argument("--seq-len", type=POS_INT, default=64, help="tokens per sequence")
    p.add_argument("--batch-size", type=POS_INT, default=8, help="sequences per step")
    p.add_argument("--lr", type=NONNEG, default=3e-3, help="AdamW learning rate")
    p.add_argument("--max-grad-norm", type=FINITE, default=1.0, help="gradient clipping norm (<= 0: none)")
    p.add_argument("--d-model", type=POS_INT, default=64, help="model width")
    p.add_argument("--layers", type=POS_INT, default=2, help="transformer layers")
    p.add_argument("--heads", type=POS_INT, default=4, help="attention heads")
    p.add_argument("--kv-heads", type=POS_INT, default=2, help="key/value heads")
    p.add_argument("--d-ff", type=POS_INT, default=128, help="MLP hidden width")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="initialisation seed")
    p.add_argument("--repeats", type=POS_INT, default=3, help="timed runs of the step (median per operation)")
    p.add_argument("--serialize", action="store_true",
                   help="time each kernel with a barrier before every dispatch (clean per-kernel times; the "
                        "recorded step lets independent dispatches overlap)")
    p.add_argument("--precision", choices=("f32", "f16"), default="f32",
                   help="f16: mixed precision (f16 activations and matmuls, f32 master weights, loss scaling)")
    p.add_argument("--by-shape", type=POS_INT, default=0, metavar="N",
                   help="also print the N costliest (kernel variant, launch sizes) pairs: which products cost what")
    p.add_argument("--device", default=None, help="index or name substring")
    p.set_defaults(fn=cmd_profile)


def version_line() -> str:
    """evermind-vk's version and the kp build it runs on (ours reports 0.9.0+evermind1)."""
    try:
        kp_version = version("kp")
    except PackageNotFoundError:
        kp_version = "not installed (run `bash ci/setup.sh`)"
    return f"evermind-vk {__version__} (kp {kp_version})"


class CliError(EvermindError):
    """A command-line argument or input that cannot work (reported as one line, exit 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line `evermind-vk: error: ...` (exit 2), never the usage block."""

    def error(self, message):
        raise CliError(f"{self.prog.removeprefix('evermind-vk').strip() + ': ' if self.prog != 'evermind-vk' else ''}"
                       f"{message} (see --help)")


def _number(kind, lo=None, lo_open=False, zero_ok=False, what=""):
    """An argparse type: a finite number of `kind`, >= lo (> lo if lo_open)."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}")
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if lo is not None and (v < lo or (lo_open and v == lo)) and not (zero_ok and v == 0):
            raise argparse.ArgumentTypeError(f"{text} must be {'>' if lo_open else '>='} {lo}{what}")
        return v
    parse.__name__ = kind.__name__
    return parse


POS_INT = _number(int, 1)
NONNEG_INT = _number(int, 0)
NONNEG = _number(float, 0.0)
FINITE = _number(float)


def _describe(e: BaseException) -> str:
    """One line for an exception: OSErrors name the file and the reason, others their message."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    msg = str(e) or type(e).__name__
    if isinstance(e, UnicodeDecodeError):
        msg = f"not UTF-8 text ({e.reason} at byte {e.start})"
    return " ".join(msg.split())  # one line


def _error(msg: str) -> None:
    """The one error line. A rank started by the --nproc launcher hands it to the launcher instead (which
    reports the run's failure once) and prints it as that rank's line."""
    line = " ".join(msg.split())
    handoff = os.environ.get(RANK_ERROR_ENV, "")
    if handoff:
        with contextlib.suppress(OSError):
            atomic_write(handoff, line.encode("utf-8", "replace"))
        print(f"evermind-vk: rank {os.environ.get('RANK', '?')}: {line}", file=sys.stderr, flush=True)
        return
    print(f"evermind-vk: error: {line}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.ArgumentDefaultsHelpFormatter
    ap = _Parser(prog="evermind-vk", description="Train and run small models on Vulkan.", formatter_class=fmt)
    ap.add_argument("--version", action="version", version=version_line())
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    sub.add_parser("devices", help="list Vulkan devices and their capabilities", formatter_class=fmt
                   ).set_defaults(fn=cmd_devices)
    dev_help = "index or name substring (default: EVERMIND_VK_DEVICE, else 0)"
    p = sub.add_parser("check", help="run a matmul on the device and check it against numpy", formatter_class=fmt)
    p.add_argument("--size", type=POS_INT, default=256, help="matrix size N (N x N x N products)")
    p.add_argument("--device", default=None, help=dev_help)
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("train", help="train a small LM (default: on the embedded corpus) and sample from it",
                       formatter_class=fmt)
    p.add_argument("--text", help="a UTF-8 text file to train on (default: the embedded corpus, stdlib docstrings)")
    p.add_argument("--epochs", type=POS_INT, default=None,
                   help="passes over the training data (default: 1 for lm; for conv-ae as many as --time-limit allows)")
    p.add_argument("--seq-len", type=POS_INT, default=64, help="tokens (bytes) per training sequence")
    p.add_argument("--batch-size", type=POS_INT, default=8, help="sequences per step")
    p.add_argument("--lr", type=NONNEG, default=3e-3, help="AdamW learning rate")
    p.add_argument("--max-grad-norm", type=FINITE, default=1.0, help="clip the gradient norm to this (<= 0: no clipping)")
    p.add_argument("--d-model", type=POS_INT, default=64, help="model width")
    p.add_argument("--layers", default="2",
                   help="layer count; for --model mamba also a list of layer types, e.g. mamba1,mamba2,attention")
    p.add_argument("--heads", type=POS_INT, default=4, help="attention heads")
    p.add_argument("--kv-heads", type=POS_INT, default=2, help="key/value heads (grouped-query attention)")
    p.add_argument("--d-ff", type=POS_INT, default=128, help="MLP hidden width")
    p.add_argument("--time-limit", type=NONNEG, default=60.0,
                   help="stop training after this many seconds (0: no limit; the default keeps a lavapipe run under 2 minutes)")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="initialisation and data-order seed")
    p.add_argument("--out", default="runs/default",
                   help="output directory: model.safetensors, config.json, loss.png, losses.csv (checked before training)")
    p.add_argument("--package", action="store_true", help="also write OUT/model.evermind (an .evermind package)")
    p.add_argument("--prompt", default="The ", help="prompt of the sample printed at the end")
    p.add_argument("--sample-tokens", type=NONNEG_INT, default=60, help="tokens of that sample")
    p.add_argument("--device", default=None, help=dev_help)
    p.add_argument("--save-every", type=NONNEG_INT, default=0, help="save a resumable checkpoint every N steps (0: at the end only)")
    p.add_argument("--resume", action="store_true", help="continue the run saved under --checkpoint")
    p.add_argument("--checkpoint", default=None, help="checkpoint path (default: OUT/trainer-checkpoint)")
    p.add_argument("--accum-steps", type=POS_INT, default=1, help="micro-batches per optimizer step")
    p.add_argument("--max-steps", type=NONNEG_INT, default=None, help="stop after this many optimizer steps")
    p.add_argument("--lr-schedule", default="constant", choices=("constant", "cosine", "step_decay"),
                   help="learning-rate schedule over the run's optimizer steps (doppler's semantics)")
    p.add_argument("--warmup-steps", type=NONNEG_INT, default=0, help="linear warm-up steps")
    p.add_argument("--precision", choices=("f32", "f16", "bf16"), default="f32",
                   help="f16: mixed precision (f16 activations and matmuls, f32 master weights and AdamW moments, "
                        "dynamic loss scaling); bf16: refused (our shader compiler cannot compile bf16)")
    # Image models: `--model conv-ae` trains a conv autoencoder on generated images instead.
    p.add_argument("--model", choices=("lm", "conv-ae", "evermind-lm", "moe", "mamba"), default="lm",
                   help="lm: our TransformerLM on text; conv-ae: a conv autoencoder on procedural images; "
                        "evermind-lm / moe: builderforce's models with their trainers (written as .evermind); "
                        "mamba: HybridMambaModel (--layers mamba1,mamba2,attention,...; written as .evermind)")
    p.add_argument("--images", type=POS_INT, default=256, help="conv-ae: training images")
    p.add_argument("--image-size", type=POS_INT, default=16, help="conv-ae: image side (a multiple of 4)")
    p.add_argument("--nproc", type=POS_INT, default=1,
                   help="data-parallel ranks (processes) on this host, one device each (round-robin, or "
                        "EVERMIND_VK_DEVICE for all); --batch-size is per rank. Needs the `dist` extra (torch)")
    p.set_defaults(fn=cmd_train)
    model_help = "a .safetensors (with config metadata), .npz or .evermind model file, or a run directory"
    p = sub.add_parser("generate", help="sample from a saved model", formatter_class=fmt)
    p.add_argument("--model", default="runs/default", help=model_help)
    p.add_argument("--prompt", default="The ", help="text to continue")
    p.add_argument("--tokens", type=NONNEG_INT, default=200, help="tokens (bytes) to generate")
    p.add_argument("--temperature", type=NONNEG, default=0.8, help="sampling temperature (0: greedy)")
    p.add_argument("--top-k", type=NONNEG_INT, default=20, help="sample among the k most likely (0: all)")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="sampling seed")
    p.add_argument("--device", default=None, help=dev_help)
    p.add_argument("--top-p", type=NONNEG, default=None, help="nucleus sampling: keep this much probability mass")
    p.add_argument("--repetition-penalty", type=NONNEG, default=1.0, help="> 1 discourages repeated tokens")
    p.add_argument("--stop", action="append", default=[], help="stop at this character (repeatable)")
    p.add_argument("--no-cache", action="store_true", help="re-run the whole context per token (no KV cache)")
    p.set_defaults(fn=cmd_generate)
    p = sub.add_parser("pack", help="package a saved model as .evermind (EVM1, zstd-framed)", formatter_class=fmt)
    p.add_argument("--model", default="runs/default", help=model_help)
    p.add_argument("--name", default="evermind-lm", help="package name")
    p.add_argument("--version", default="1.0.0", help="package version")
    p.add_argument("--description", default=None, help="model card description (default: NAME: an evermind-vk TransformerLM)")
    p.add_argument("--fp16", action="store_true", help="store weights as f16 (round-to-nearest-even)")
    p.add_argument("--raw", action="store_true",
                   help="write the raw EVM1 blob builderforce reads (default: one zstd frame around it)")
    p.add_argument("--out", default="model.evermind", help="package file to write")
    p.add_argument("--device", default=None, help=dev_help)
    p.set_defaults(fn=cmd_pack)
    p = sub.add_parser("inspect", help="show a package's manifest, sizes, checksums, a checkpoint's metadata, "
                       "or a model file's config", formatter_class=fmt)
    p.add_argument("file", help=".evermind, checkpoint, .safetensors or .npz")
    p.set_defaults(fn=cmd_inspect)
    p = sub.add_parser("verify", help="exit 1 on any problem in an .evermind package or checkpoint", formatter_class=fmt)
    p.add_argument("file", help=".evermind package or checkpoint")
    p.set_defaults(fn=cmd_verify)
    _add_profile_parser(sub)
    add_video_parser(sub)
    return ap


def main(argv=None) -> int:
    """Run the command; every failure is one line `evermind-vk: error: ...` on stderr and exit code 2
    (1 for a failed `verify`), never a traceback (EVERMIND_VK_TRACEBACK=1 shows it, for bug reports)."""
    try:
        args = build_parser().parse_args(argv)
    except CliError as e:
        _error(str(e))
        return 2
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else 0
    if getattr(args, "time_limit", None) == 0:
        args.time_limit = None
    if getattr(args, "top_k", None) == 0:
        args.top_k = None
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except (EvermindError, OSError, UnicodeDecodeError, ValueError, MemoryError) as e:
        if os.environ.get("EVERMIND_VK_TRACEBACK", "").strip() not in ("", "0"):
            raise
        prefix = "" if isinstance(e, (CliError, OSError)) else f"{type(e).__name__}: "
        _error(prefix + _describe(e))
        return 2
    except Exception as e:  # a bug: still one line, with how to see more
        if os.environ.get("EVERMIND_VK_TRACEBACK", "").strip() not in ("", "0"):
            raise
        _error(f"internal error {type(e).__name__}: {_describe(e)} (please report it; "
               "EVERMIND_VK_TRACEBACK=1 shows the traceback)")
        return 2


# -- builderforce's models: train --model evermind-lm|moe, generate --model any.evermind ------------------
from .models import EvermindLM, EvermindLMConfig, MoEConfig, SharedExpertMoE  # noqa: E402
from .train import EvermindLMTrainer, MoETrainer  # noqa: E402


def cmd_train_builderforce(args) -> int:
    """Train builderforce's EvermindLM (next byte) or SharedExpertMoE (next byte's embedding from this
    byte's: a fixed seeded table) on the corpus with its trainer, write out/model.evermind, report."""
    _check_out_dir(args.out, ["model.evermind"])
    dev = get_device(args.device)
    text = _read_text(args.text) if args.text else default_corpus()
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
    for e in range(args.epochs or 1):
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
    path = os.path.join(args.out, "model.evermind")
    EvermindPackage.from_model(model, name=f"evermind-vk-{args.model}", version="1.0.0").to_file(path)
    print(f"wrote {path}")
    if args.model == "evermind-lm":
        out = model.generate(tok.encode(args.prompt), args.sample_tokens, temperature=0.8, seed=args.seed + 1)
        print("sample: " + repr(args.prompt + tok.decode(out)))
    return 0


# -- video: VideoRVQ encode / decode (frames as PNG: a folder, or one horizontal strip) ---------------------
from .files import serialize_codec  # noqa: E402
from .io.tokens import load_token_list  # noqa: E402
from .models.video_rvq import VideoRVQCodec  # noqa: E402


def _read_frames(path: str, n_strip: int) -> list:
    import matplotlib.image as mpimg  # optional dependency
    files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.lower().endswith(".png")) \
        if os.path.isdir(path) else [path]
    imgs = [np.asarray(mpimg.imread(io.BytesIO(_png_bytes(f)), format="png"), np.float32)[..., :3] for f in files]
    if not os.path.isdir(path):
        strip = imgs[0]
        if n_strip < 1 or strip.shape[1] % n_strip:
            raise FormatError(f"{path}: width {strip.shape[1]} is not {n_strip} equal frames (--frames)")
        w = strip.shape[1] // n_strip
        imgs = [strip[:, i * w:(i + 1) * w] for i in range(n_strip)]
    if not imgs:
        raise FormatError(f"{path}: no PNG frames")
    return imgs


MAX_DECODED_BYTES = 1 << 30  # video decode: the frames a token list may decode to (f32 pixels)
MAX_FRAME_PIXELS = 1 << 22  # a PNG frame's width x height (2048 x 2048): its header is checked before decoding


def _png_bytes(path: str) -> bytes:
    """A PNG frame's bytes: a regular file whose IHDR declares at most MAX_FRAME_PIXELS pixels."""
    raw = bytes(read_regular(path, "PNG frame"))
    if raw[:8] != b"\x89PNG\r\n\x1a\n" or raw[12:16] != b"IHDR" or len(raw) < 24:
        raise FormatError(f"{path}: not a PNG file")
    w, h = struct.unpack(">II", raw[16:24])
    if w * h > MAX_FRAME_PIXELS:
        raise LimitError(f"{path}: a PNG of {w} x {h} pixels; frames may have at most {MAX_FRAME_PIXELS:,}")
    return raw


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
        raise FormatError("video decode needs --codec FILE.vrq0")
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
    _write_frames(frames, args.out)
    print(f"{len(toks)} tokens -> {len(frames)} frames; wrote {args.out}")
    return 0


def add_video_parser(sub) -> None:
    p = sub.add_parser("video", help="VideoRVQ: encode PNG frames (a folder or a strip) to tokens, or decode tokens",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("action", choices=["encode", "decode"])
    p.add_argument("input", help="encode: a folder of PNGs or one horizontal strip; decode: a JSON token list")
    p.add_argument("--out", required=True, help="encode: tokens JSON; decode: a folder, or a .png strip")
    p.add_argument("--codec", help="VRQ0 file (encode: fitted and written here if absent)")
    p.add_argument("--frames", type=POS_INT, default=1, help="frames in an input strip")
    p.add_argument("--patch", type=POS_INT, default=4, help="patch side in pixels")
    p.add_argument("--levels", type=POS_INT, default=2, help="residual quantisation levels")
    p.add_argument("--codebook", type=POS_INT, default=16, help="codewords per level")
    p.add_argument("--keyframe-interval", type=POS_INT, default=12, help="frames between key frames")
    p.add_argument("--iterations", type=POS_INT, default=8, help="k-means iterations per level")
    p.set_defaults(fn=cmd_video)

# -- HybridMambaModel: train --model mamba --layers mamba1,mamba2,attention,... ------------------------------
def cmd_train_mamba(args) -> int:
    """Train a HybridMambaModel (the Trainer: recorded steps, AdamW, clipping) on the corpus, write
    OUT/model.evermind (model type evermind-hybrid-mamba) and print a sample generated from the recurrent state."""
    _check_out_dir(args.out, ["model.evermind"])
    spec = str(args.layers)
    layers = ("mamba1",) * int(spec) if spec.isdigit() else tuple(t.strip() for t in spec.split(",") if t.strip())
    try:
        mcfg = HybridMambaConfig(vocabSize=256, dModel=args.d_model, numLayers=len(layers), layers=layers,
                                 nHeads=args.heads, seed=args.seed)
    except (TypeError, ValueError) as e:
        raise CliError(f"--layers {spec}: {e}") from e
    text = _read_text(args.text) if args.text else default_corpus()
    tok = ByteTokenizer()
    ids = np.asarray(tok.encode(text))
    dev = get_device(args.device)
    model = HybridMambaModel(mcfg, device=dev)
    print(f"device: {dev.info.name} | HybridMambaModel {', '.join(layers)}: {model.num_parameters():,} parameters",
          flush=True)
    trainer = Trainer(model, tok, seed=args.seed)
    t0 = time.perf_counter()
    trainer.train(ids, epochs=args.epochs or 1, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                  max_grad_norm=args.max_grad_norm, progress=True, time_limit=args.time_limit)
    steps = [h["loss"] for h in trainer.history]
    k = max(1, len(steps) // 10)
    print(f"trained {len(steps)} steps in {time.perf_counter() - t0:.1f}s: loss {np.mean(steps[:k]):.3f} "
          f"(mean of the first {k}) -> {np.mean(steps[-k:]):.3f} (last {k})")
    path = os.path.join(args.out, "model.evermind")
    EvermindPackage.from_model(model, "hybrid-mamba").to_file(path)
    print(f"wrote {path}")
    out = model.generate(tok.encode(args.prompt), max_new_tokens=args.sample_tokens, temperature=0.8, top_k=20,
                         seed=args.seed)
    print("sample: " + repr(args.prompt + tok.decode(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
