"""`evermind-vk train`: train a model on text (or procedural images), save it, plot the loss, sample."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from types import SimpleNamespace

import numpy as np

from ..errors import DistributedError
from ..files import export_safetensors, save_model
from ..io.atomic import atomic_write
from ..io.package import EvermindPackage
from ..models import (ConvAE, ConvAEConfig, EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel,
                      LMConfig, MoEConfig, SharedExpertMoE, TransformerLM)
from ..runtime import get_device
from ..train import (ByteTokenizer, EvermindLMTrainer, LRSchedule, MoETrainer, Trainer, build_chunks, default_corpus,
                     generate)
from ..train.distributed import World, spawn
from ..train.image import ImageTrainer, image_grid_png, shapes_dataset
from ..train.plot import loss_curve_png, plot_losses, write_losses_csv
from ..train.trainer import BF16_BLOCKED
from .args import add_data, add_device, add_model_shape, add_optim, add_precision, layer_count
from .common import HELD_OUT, HELD_OUT_MAX, NONNEG, NONNEG_INT, POS_INT, CliError, check_out_dir, read_text


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
    if world is None and args.nproc > 1:
        check_out_dir(args.out, [])
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
    args.layers = layer_count(args)
    lead = world is None or world.rank == 0  # rank 0 alone prints and writes files (every rank evaluates a share)
    try:
        if not lead:
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                return _cmd_train_lm(args, world, lead)
        return _cmd_train_lm(args, world, lead)
    finally:
        if world is not None:  # leave the process group before exit (see distributed._destroy_at_exit)
            world.close()


def _stopper(args, trainer) -> str:
    """Which flag ended a run before its planned steps."""
    return f"--max-steps {args.max_steps}" if args.max_steps and trainer.global_step >= args.max_steps else "--time-limit"


def _cmd_train_lm(args, world, lead: bool) -> int:
    """Train a TransformerLM (or hand builderforce's models to their trainers)."""
    if args.model in ("evermind-lm", "moe"):
        return cmd_train_builderforce(args)
    if args.precision == "bf16":
        raise CliError(f"--precision bf16: {BF16_BLOCKED.split(': ', 1)[1]}")
    run = _lm_setup(args, world)
    code = _lm_fit(args, run, world, lead)
    if code is not None or not lead:
        return code or 0
    _lm_finish(args, run)
    return 0


def _lm_setup(args, world) -> SimpleNamespace:
    """Everything that can be checked, checked before the first step: data, outputs, device, model, trainer."""
    run = SimpleNamespace(epochs=1 if args.epochs is None else args.epochs)
    run.outputs = ["model.safetensors", "config.json", "loss.png", "losses.csv"] + (["model.evermind"] if args.package else [])
    run.text = read_text(args.text) if args.text else default_corpus()
    run.tok = ByteTokenizer()
    run.ids = np.asarray(run.tok.encode(run.text))
    if run.ids.size < 2:
        raise CliError(f"--text {args.text}: {run.ids.size} bytes; need at least 2 (one next-token pair)"
                       if args.text else "the embedded corpus is empty")
    run.cfg = LMConfig(d_model=args.d_model, n_layers=args.layers, n_heads=args.heads, n_kv_heads=args.kv_heads,
                       d_ff=args.d_ff, max_seq_len=max(args.seq_len, 64), seed=args.seed)
    run.n_held = min(int(run.ids.size * HELD_OUT), HELD_OUT_MAX) if run.ids.size >= 40 else 0
    run.train_ids, run.held = (run.ids[:-run.n_held], run.ids[-run.n_held:]) if run.n_held >= 2 else (run.ids, None)
    check_out_dir(args.out, run.outputs)
    run.dev = get_device(args.device if args.device is not None or world is None else world.device())
    # Resumable runs: a checkpoint under --out, saved every --save-every steps, at the end and on
    # SIGINT/SIGTERM (at the next step boundary); --resume continues it (same data and options).
    run.key = args.checkpoint or os.path.join(args.out, "trainer-checkpoint")
    if args.resume:
        run.trainer = Trainer.from_checkpoint(run.key, device=run.dev, tokenizer=run.tok, world=world)
        run.model = run.trainer.model
        if run.trainer.precision != args.precision:
            raise CliError(f"--resume: {run.key} was trained with --precision {run.trainer.precision}, not {args.precision}")
        print(f"resuming {run.key} at step {run.trainer.global_step}", flush=True)
    else:
        run.model = TransformerLM(run.cfg, device=run.dev)
        run.trainer = Trainer(run.model, run.tok, seed=args.seed, world=world, precision=args.precision)
    print(f"device: {run.dev.info.name} | corpus: {run.ids.size:,} bytes "
          f"({'--text ' + args.text if args.text else 'embedded default: Python stdlib docstrings'}; "
          f"{'last ' + format(run.held.size, ',') + ' held out' if run.held is not None else 'too short to hold any out'}) "
          f"| model: {run.model.num_parameters():,} parameters"
          + (f" | data-parallel: {world.size} ranks x batch {args.batch_size}" if world else ""), flush=True)
    return run


def _lm_fit(args, run, world, lead: bool) -> int | None:
    """Evaluate, train (resumable, stoppable by a signal), evaluate again; an exit code if interrupted."""
    eval_len = min(args.seq_len, run.model.config.max_seq_len)
    t_eval = time.perf_counter()
    # every rank evaluates its share of the held-out batches (Trainer.evaluate all-reduces the sums)
    ppl_before = run.trainer.evaluate(run.held, seq_len=eval_len, batch_size=args.batch_size) if run.held is not None else None
    t_eval = time.perf_counter() - t_eval
    batches_per_epoch = -(-len(build_chunks(run.train_ids, args.seq_len)) // (args.batch_size * (world.size if world else 1)))
    steps_per_epoch = -(-batches_per_epoch // args.accum_steps)  # optimizer steps (history entries) per epoch
    epochs = run.epochs
    planned = steps_per_epoch * epochs
    schedule = None
    if args.lr_schedule != "constant" or args.warmup_steps:
        schedule = LRSchedule(type=args.lr_schedule, warmup_steps=args.warmup_steps,
                              total_steps=max(1, args.max_steps or -(-batches_per_epoch * epochs // args.accum_steps)))

    def epoch_done(e, loss, _norm):
        if not lead:
            return
        done = sum(1 for h in run.trainer.history if h["epoch"] == e)
        if done < steps_per_epoch:
            print(f"epoch {e}: mean loss over the {done} of {steps_per_epoch} steps run {loss:.4f} "
                  f"(stopped by {_stopper(args, run.trainer)})", file=sys.stderr, flush=True)
        else:
            print(f"epoch {e}: mean loss {loss:.4f} ({done} steps)", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    run.trainer.train(run.train_ids, epochs=epochs, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                      max_grad_norm=args.max_grad_norm, progress=lead, time_limit=args.time_limit,
                      on_epoch_end=epoch_done, schedule=schedule, accum_steps=args.accum_steps,
                      max_steps=args.max_steps, save_key=run.key, save_every=args.save_every, stop_on_signal=True)
    if run.trainer.interrupted is not None:
        print(f"interrupted by signal {run.trainer.interrupted} at step {run.trainer.global_step}; saved {run.key} "
              f"(continue with --resume)", flush=True)
        return 128 + int(run.trainer.interrupted)
    dt = time.perf_counter() - t0
    ppl_after = run.trainer.evaluate(run.held, seq_len=eval_len, batch_size=args.batch_size) if run.held is not None else None
    run.dt, run.ppl_before, run.ppl_after, run.t_eval, run.planned = dt, ppl_before, ppl_after, t_eval, planned
    return None


def _lm_finish(args, run) -> None:
    """Report the run, write its outputs, print a sample."""
    model, trainer, tok, held = run.model, run.trainer, run.tok, run.held
    dt, planned, epochs = run.dt, run.planned, run.epochs
    steps = [h["loss"] for h in trainer.history]
    k = max(1, len(steps) // 10)
    how = (f"training stopped by {_stopper(args, trainer)} after {len(steps)} of {planned} steps" if len(steps) < planned
           else f"trained all {planned} steps ({epochs} epoch{'s' if epochs > 1 else ''})")
    print(f"{how} in {dt:.1f}s: loss {np.mean(steps[:k]):.3f} (mean of the first {k} steps) -> "
          f"{np.mean(steps[-k:]):.3f} (mean of the last {k})")
    if held is not None:
        print(f"held-out perplexity (last {held.size:,} bytes, never trained on): {run.ppl_before:.2f} before training "
              f"-> {run.ppl_after:.2f} after (a uniform guess over 256 bytes: 256; {run.t_eval:.1f}s per evaluation)")
    paths = {n: os.path.join(args.out, n) for n in run.outputs}
    export_safetensors(model, paths["model.safetensors"])
    atomic_write(paths["config.json"], (json.dumps(model.config.to_dict(), indent=2, sort_keys=True) + "\n").encode())
    write_losses_csv(trainer.history, paths["losses.csv"])
    backend = plot_losses(trainer.history, paths["loss.png"],
                          title=f"evermind-vk train: {model.num_parameters():,} parameters on {run.dev.info.name}",
                          note=f"{how}, {dt:.0f}s; batch {args.batch_size} x {args.seq_len} tokens, lr {args.lr:g}")
    if backend != "matplotlib":
        print("loss.png: matplotlib is not installed, so the plot is the plain fallback (no axis labels or "
              "numbers); install the `plot` extra (pip install 'evermind-vk[plot]') for a readable one",
              file=sys.stderr)
    if args.package:
        pkg = EvermindPackage.from_model(model, "evermind-lm", card={"description": "an evermind-vk TransformerLM"})
        pkg.to_file(paths["model.evermind"])
    print("wrote " + ", ".join(paths[n] for n in run.outputs))
    prompt = args.prompt
    out = generate(model, tok.encode(prompt), max_new_tokens=args.sample_tokens, temperature=0.8, top_k=20,
                   seed=args.seed)
    print("sample: " + repr(prompt + tok.decode(out)))


# -- image models ------------------------------------------------------------------------
def cmd_train_image(args) -> int:
    """Train a ConvAE on the seeded procedural image set; write its weights, the loss curve and a PNG
    grid of held-out images above their reconstructions."""
    check_out_dir(args.out, ["model.npz", "loss.png", "reconstructions.png"])
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


def cmd_train_builderforce(args) -> int:
    """Train builderforce's EvermindLM (next byte) or SharedExpertMoE (next byte's embedding from this
    byte's: a fixed seeded table) on the corpus with its trainer, write out/model.evermind, report."""
    check_out_dir(args.out, ["model.evermind"])
    dev = get_device(args.device)
    text = read_text(args.text) if args.text else default_corpus()
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


# -- HybridMambaModel: train --model mamba --layers mamba1,mamba2,attention,... ------------------------------
def cmd_train_mamba(args) -> int:
    """Train a HybridMambaModel (the Trainer: recorded steps, AdamW, clipping) on the corpus, write
    OUT/model.evermind (model type evermind-hybrid-mamba) and print a sample generated from the recurrent state."""
    check_out_dir(args.out, ["model.evermind"])
    spec = str(args.layers)
    layers = ("mamba1",) * int(spec) if spec.isdigit() else tuple(t.strip() for t in spec.split(",") if t.strip())
    try:
        mcfg = HybridMambaConfig(vocabSize=256, dModel=args.d_model, numLayers=len(layers), layers=layers,
                                 nHeads=args.heads, seed=args.seed)
    except (TypeError, ValueError) as e:
        raise CliError(f"--layers {spec}: {e}") from e
    text = read_text(args.text) if args.text else default_corpus()
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


def add_parser(sub) -> None:
    """The `train` subcommand."""
    p = sub.add_parser("train", help="train a small LM (default: on the embedded corpus) and sample from it",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_data(p, "a UTF-8 text file to train on (default: the embedded corpus, stdlib docstrings)")
    p.add_argument("--epochs", type=POS_INT, default=None,
                   help="passes over the training data (default: 1 for lm; for conv-ae as many as --time-limit allows)")
    add_optim(p)
    add_model_shape(p)
    p.add_argument("--time-limit", type=NONNEG, default=60.0,
                   help="stop training after this many seconds (0: no limit; the default keeps a lavapipe run under 2 minutes)")
    p.add_argument("--out", default="runs/default",
                   help="output directory: model.safetensors, config.json, loss.png, losses.csv (checked before training)")
    p.add_argument("--package", action="store_true", help="also write OUT/model.evermind (an .evermind package)")
    p.add_argument("--prompt", default="The ", help="prompt of the sample printed at the end")
    p.add_argument("--sample-tokens", type=NONNEG_INT, default=60, help="tokens of that sample")
    add_device(p)
    p.add_argument("--save-every", type=NONNEG_INT, default=0, help="save a resumable checkpoint every N steps (0: at the end only)")
    p.add_argument("--resume", action="store_true", help="continue the run saved under --checkpoint")
    p.add_argument("--checkpoint", default=None, help="checkpoint path (default: OUT/trainer-checkpoint)")
    p.add_argument("--accum-steps", type=POS_INT, default=1, help="micro-batches per optimizer step")
    p.add_argument("--max-steps", type=NONNEG_INT, default=None, help="stop after this many optimizer steps")
    p.add_argument("--lr-schedule", default="constant", choices=("constant", "cosine", "step_decay"),
                   help="learning-rate schedule over the run's optimizer steps (doppler's semantics)")
    p.add_argument("--warmup-steps", type=NONNEG_INT, default=0, help="linear warm-up steps")
    add_precision(p)
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
