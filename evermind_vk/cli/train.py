"""`evermind-vk train --model {lm,evermind-lm,moe,mamba,conv-ae}`: one path for every model type.

Every model trains through the one Trainer and writes the same outputs under --out (its weights in their
natural format, config.json, loss.png, losses.csv; conv-ae also reconstructions.png), reports the held-out
metric before and after, and honours --save-every, --resume, Ctrl-C (SIGINT/SIGTERM save at the next step
boundary), --precision, --nproc, schedules, accumulation and --max-steps. --resume continues only the same
run: the checkpoint's model, configuration, training flags and data must match, else nothing is written."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from types import SimpleNamespace

import numpy as np

from ..errors import CheckpointMismatchError, DistributedError
from ..io.atomic import atomic_write
from ..io.checkpoint import checkpoint_path
from ..io.regular import check_regular
from ..runtime import get_device, tensor
from ..train import LRSchedule, Trainer
from ..train.capacity import check_fits
from ..train.distributed import World, spawn
from ..train.tokenizer import ByteTokenizer
from ..train.image import image_grid_png
from ..train.plot import plot_losses, write_losses_csv
from ..train.trainer import BF16_BLOCKED
from ..files import is_gguf
from . import models
from .args import add_checkpoint_layers, add_data, add_device, add_model_shape, add_optim, add_precision
from .common import NONNEG, NONNEG_INT, POS_INT, CliError, check_out_dir
from .pretrained import add_lora_args, cmd_train_pretrained

# The flags a resumed run must share with the saved one (the model's shape is checked through its config,
# the data and batching through the Trainer's data fingerprint).
RUN_FLAGS = ("model", "lr", "max_grad_norm", "lr_schedule", "warmup_steps", "precision", "seed", "accum_steps")


def checkpoint_key(args) -> str:
    """Where the run's resumable checkpoint lives: --checkpoint, else OUT/trainer-checkpoint (beside the outputs)."""
    return args.checkpoint or os.path.join(args.out, "trainer-checkpoint")


def check_flags(args) -> None:
    """Refuse, before anything is built, every flag that cannot apply to --model."""
    if args.precision == "bf16":
        raise CliError(f"--precision bf16: {BF16_BLOCKED.split(': ', 1)[1]}")
    if args.precision != "f32" and args.model != "lm":
        raise CliError(f"--precision {args.precision}: mixed precision needs f16 kernels for every op of the model; "
                       f"only --model lm has them (not {args.model})")
    models.resolve_model_flags(args)
    if getattr(args, "prompt", None) is not None:
        try:
            ByteTokenizer().encode(args.prompt)
        except UnicodeError as e:
            raise CliError(f"--prompt {args.prompt!r}: cannot be encoded as UTF-8 ({e.reason}); "
                           "pass text your terminal encodes as UTF-8") from e


def cmd_train(args) -> int:
    """Train --model on its data, save it, plot the loss, report the held-out metric, print a sample; a
    pretrained --model (a .gguf file or smollm2-135m) is fine-tuned with LoRA adapters instead."""
    if is_gguf(args.model):
        return cmd_train_pretrained(args)
    if args.lora_rank or args.merge:
        raise CliError("--lora-rank and --merge fine-tune a pretrained --model (a .gguf file or smollm2-135m)")
    check_flags(args)
    # Data-parallel: --nproc N launches N ranks running this command (or torchrun set WORLD_SIZE etc.).
    world = World.from_env() if "WORLD_SIZE" in os.environ else None
    if world is not None and args.nproc > 1 and args.nproc != world.size:
        raise CliError(f"--nproc {args.nproc} but WORLD_SIZE={world.size} in the environment")
    shapes = None if args.resume else models.param_shapes(args)
    if shapes is not None:  # the host memory its training state needs, on every rank, before spawning any
        check_fits(shapes, None, "--d-model/--layers/--d-ff", ranks=args.nproc if world is None else 1)
    if world is None and args.nproc > 1:
        check_out_dir(args.out, [])
        key = checkpoint_key(args)
        try:
            return spawn(args.argv, args.nproc, log_dir=args.out)
        except DistributedError as e:
            if os.path.exists(key):
                raise CliError(f"{e}; checkpoints saved before are kept: continue with --resume ({key})") from e
            raise
    lead = world is None or world.rank == 0  # rank 0 alone prints and writes files (every rank evaluates a share)
    try:
        if not lead:
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                return _train(args, world, lead)
        return _train(args, world, lead)
    finally:
        if world is not None:  # leave the process group before exit (see distributed._destroy_at_exit)
            world.close()


def _train(args, world, lead: bool) -> int:
    run = _setup(args, world)
    code = _fit(args, run, world, lead)
    if code is not None or not lead:
        return code or 0
    _finish(args, run)
    return 0


def _run_info(args) -> dict:
    return {k: getattr(args, k) for k in RUN_FLAGS}


def _resume(args, model, world) -> Trainer:
    """The saved run under --checkpoint, refused (nothing written) unless it is this run."""
    key = checkpoint_key(args)
    trainer = Trainer.from_checkpoint(key, device=model.device, world=world, checkpoint_layers=args.checkpoint_layers)
    saved = trainer.model
    if type(saved) is not type(model):
        raise CliError(f"--resume: {key} holds a {type(saved).__name__}, not --model {args.model}'s "
                       f"{type(model).__name__}; nothing was written")
    a, b = saved.config.to_dict(), model.config.to_dict()
    diff = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    stored = trainer.run_info or {}
    diff.update({f"--{k.replace('_', '-')}": (stored.get(k), v) for k, v in _run_info(args).items()
                 if k in stored and stored[k] != v})
    if diff:
        raise CliError(f"--resume: {key} is another run (saved vs now: "
                       + ", ".join(f"{k} {s!r} vs {n!r}" for k, (s, n) in diff.items()) + "); nothing was written")
    return trainer


def _setup(args, world) -> SimpleNamespace:
    """Everything that can be checked, checked before the first step: data, outputs, device, model, trainer."""
    run = SimpleNamespace(outputs=models.outputs(args), key=checkpoint_key(args))
    if args.resume:
        check_regular(checkpoint_path(run.key), "--checkpoint")  # a device, FIFO or directory: said as such
    if args.resume and not os.path.isfile(checkpoint_path(run.key)):
        raise CliError(f"--resume: no checkpoint at {run.key}: nothing to continue (train once without --resume, "
                       "or give --checkpoint)")
    run.data = models.load_data(args)
    check_out_dir(args.out, run.outputs)
    run.dev = get_device(args.device if args.device is not None or world is None else world.device())
    shapes = models.param_shapes(args)
    if shapes is not None:  # each weight within maxStorageBufferRange; on a GPU, the training state within its memory
        check_fits(shapes, run.dev, "--d-model/--layers/--d-ff", available=1 << 62)
    model = models.build(args, run.dev)
    if args.resume:
        run.trainer = _resume(args, model, world)
    else:
        run.trainer = Trainer(model, seed=args.seed, world=world, precision=args.precision,
                              checkpoint_layers=args.checkpoint_layers)
    run.trainer.run_info = _run_info(args)
    run.model = run.trainer.model
    try:
        run.source = run.trainer.source(run.data.train, args.seq_len or 0)
    except ValueError as e:
        raise CliError(f"--model {args.model}: {e}") from e
    if args.resume:
        try:
            run.trainer.check_resume(run.source, args.seq_len, models.rows_per_batch(args), args.accum_steps)
        except CheckpointMismatchError as e:
            raise CliError(f"--resume: {e}; nothing was written") from e
        print(f"resuming {run.key} at step {run.trainer.global_step}", flush=True)
    print(f"device: {run.dev.info.name} | data: {run.data.describe} | model: {args.model} "
          f"({type(run.model).__name__}), {run.model.num_parameters():,} parameters"
          + (f" | data-parallel: {world.size} ranks x batch {args.batch_size}" if world else ""), flush=True)
    return run


def _plan(args, run, world) -> tuple[int, int, LRSchedule | None]:
    """(optimizer steps per epoch, epochs, schedule) of the run."""
    epochs = args.epochs if args.epochs is not None else (10_000 if args.model == "conv-ae" and args.time_limit else 1)
    gbs = models.rows_per_batch(args) * (world.size if world else 1)
    batches_per_epoch = -(-len(run.source) // gbs)
    steps_per_epoch = -(-batches_per_epoch // args.accum_steps)  # optimizer steps (history entries) per epoch
    schedule = None
    if args.lr_schedule != "constant" or args.warmup_steps:
        schedule = LRSchedule(type=args.lr_schedule, warmup_steps=args.warmup_steps,
                              total_steps=max(1, args.max_steps or steps_per_epoch * epochs))
    return steps_per_epoch, epochs, schedule


def _stopper(args, trainer) -> str:
    """Which flag ended a run before its planned steps."""
    return f"--max-steps {args.max_steps}" if trainer.stopped_by == "max_steps" else "--time-limit"


def _evaluate(args, run) -> float | None:
    if run.data.held is None:
        return None
    seq_len = min(args.seq_len, getattr(run.model.config, "max_seq_len", args.seq_len)) if args.seq_len else 64
    return run.trainer.evaluate(run.data.held, seq_len=seq_len, batch_size=models.rows_per_batch(args))


def _fit(args, run, world, lead: bool) -> int | None:
    """Evaluate, train (resumable, stoppable by a signal), evaluate again; an exit code if interrupted."""
    steps_per_epoch, run.epochs, schedule = _plan(args, run, world)
    run.planned = steps_per_epoch * run.epochs
    t_eval = time.perf_counter()
    run.before = _evaluate(args, run)  # every rank evaluates its share (Trainer.evaluate all-reduces the sums)
    run.t_eval = time.perf_counter() - t_eval
    trainer = run.trainer

    def epoch_done(e, loss, _norm):
        if not lead:
            return
        done = sum(1 for h in trainer.history if h["epoch"] == e)
        if done < steps_per_epoch:
            print(f"epoch {e}: mean loss over the {done} of {steps_per_epoch} steps run {loss:.4f} "
                  f"(stopped by {_stopper(args, trainer)})", file=sys.stderr, flush=True)
        else:
            print(f"epoch {e}: mean loss {loss:.4f} ({done} steps)", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    try:
        trainer.train(run.source, epochs=run.epochs, batch_size=models.rows_per_batch(args), lr=args.lr,
                      max_grad_norm=args.max_grad_norm, progress=lead, time_limit=args.time_limit,
                      on_epoch_end=epoch_done, schedule=schedule, accum_steps=args.accum_steps,
                      max_steps=args.max_steps, save_key=run.key, save_every=args.save_every, stop_on_signal=True)
    except CheckpointMismatchError as e:  # raised before the first step: nothing was written
        raise CliError(f"--resume: {e}; nothing was written") from e
    if trainer.interrupted is not None:
        print(f"interrupted by signal {trainer.interrupted} at step {trainer.global_step}; saved {run.key} "
              f"(continue with --resume)", flush=True)
        return 128 + int(trainer.interrupted)
    run.dt = time.perf_counter() - t0
    run.after = _evaluate(args, run)
    return None


def _finish(args, run) -> None:
    """Report the run, write its outputs, print a sample."""
    model, trainer, data = run.model, run.trainer, run.data
    steps = [h["loss"] for h in trainer.history]
    k = max(1, len(steps) // 10)
    how = (f"training stopped by {_stopper(args, trainer)} after {len(steps)} of {run.planned} steps"
           if len(steps) < run.planned else
           f"trained all {run.planned} steps ({run.epochs} epoch{'s' if run.epochs > 1 else ''})")
    print(f"{how} in {run.dt:.1f}s: loss {np.mean(steps[:k]):.4g} (mean of the first {k} steps) -> "
          f"{np.mean(steps[-k:]):.4g} (mean of the last {k})")
    if data.held is not None:
        uniform = "; a uniform guess over 256 bytes: 256" if data.metric == "perplexity" else ""
        print(f"held-out {data.metric} (never trained on): {run.before:.4g} before training -> {run.after:.4g} "
              f"after ({run.t_eval:.1f}s per evaluation{uniform})")
    paths = {n: os.path.join(args.out, n) for n in run.outputs}
    models.write_weights(args, model, args.out)
    atomic_write(paths["config.json"], (json.dumps(models.config_json(model), indent=2, sort_keys=True) + "\n").encode())
    write_losses_csv(trainer.history, paths["losses.csv"])
    backend = plot_losses(trainer.history, paths["loss.png"],
                          title=f"evermind-vk train --model {args.model}: {model.num_parameters():,} parameters "
                                f"on {run.dev.info.name}",
                          note=f"{how}, {run.dt:.0f}s; batch {args.batch_size}, lr {args.lr:g}")
    if backend != "matplotlib":
        print("loss.png: matplotlib is not installed, so the plot is the plain fallback (no axis labels or "
              "numbers); install the `plot` extra (pip install 'evermind-vk[plot]') for a readable one",
              file=sys.stderr)
    if args.model == "conv-ae":
        held = data.held[:8]
        image_grid_png([held, model.forward(tensor(held, device=model.device)).numpy()], paths["reconstructions.png"])
    print("wrote " + ", ".join(paths[n] for n in run.outputs)
          + (" (held-out images above, reconstructions below)" if args.model == "conv-ae" else ""))
    text = models.sample(args, model)
    if text is not None:
        print("sample: " + repr(text))


def add_parser(sub) -> None:
    """The `train` subcommand."""
    p = sub.add_parser("train", help="train a model (default: a small LM on the embedded corpus) and sample from it",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_data(p, "a UTF-8 text file to train on (default: the embedded corpus, stdlib docstrings; not conv-ae)")
    p.add_argument("--epochs", type=POS_INT, default=None,
                   help="passes over the training data (default: 1; for conv-ae as many as --time-limit allows)")
    add_optim(p)
    add_model_shape(p, pretrained=True)
    p.add_argument("--time-limit", type=NONNEG, default=60.0,
                   help="stop training after this many seconds (0: no limit; the default keeps a lavapipe run under 2 minutes)")
    p.add_argument("--out", default="runs/default",
                   help="output directory: the weights (model.safetensors for lm, model.evermind for evermind-lm, moe "
                        "and mamba, model.npz for conv-ae), config.json, loss.png, losses.csv (checked before training)")
    p.add_argument("--package", action="store_true",
                   help="also write OUT/model.evermind (lm, conv-ae; evermind-lm, moe and mamba write it anyway)")
    p.add_argument("--prompt", default=None, help="prompt of the sample printed at the end (lm, evermind-lm, mamba; "
                                                  "default 'The ')")
    p.add_argument("--sample-tokens", type=NONNEG_INT, default=None,
                   help="tokens of that sample (lm, evermind-lm, mamba; default 60)")
    add_device(p)
    p.add_argument("--save-every", type=NONNEG_INT, default=0, help="save a resumable checkpoint every N steps (0: at the end only)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run saved under --checkpoint (refused unless model, flags and data match)")
    p.add_argument("--checkpoint", default=None, help="checkpoint path (default: OUT/trainer-checkpoint)")
    p.add_argument("--accum-steps", type=POS_INT, default=1, help="micro-batches per optimizer step")
    p.add_argument("--max-steps", type=NONNEG_INT, default=None, help="stop after this many optimizer steps")
    p.add_argument("--lr-schedule", default="constant", choices=("constant", "cosine", "step_decay"),
                   help="learning-rate schedule over the run's optimizer steps (doppler's semantics)")
    p.add_argument("--warmup-steps", type=NONNEG_INT, default=0, help="linear warm-up steps")
    add_precision(p)
    add_checkpoint_layers(p)
    add_lora_args(p)
    p.add_argument("--nproc", type=POS_INT, default=1,
                   help="data-parallel ranks (processes) on this host, one device each (round-robin, or "
                        "EVERMIND_VK_DEVICE for all); --batch-size is per rank. Needs the `dist` extra (torch)")
    p.set_defaults(fn=cmd_train)
