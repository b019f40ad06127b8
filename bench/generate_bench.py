#!/usr/bin/env python3
"""Generation throughput: prefill and decode tokens/s of evermind-vk's recorded decoding (train/decode.py)
for TransformerLM (the default CLI model and the 23.7M config of bench/train_bench.py), EvermindLM and
HybridMamba at batch sizes B, against the same architectures in PyTorch in the same run (eager with a KV
cache; torch.compile with CUDA graphs of a static-shape decode step where CUDA is there; the CPU with the
same thread count), the uncached path (a forward of the whole context per token, B = 1), and the decode
step's launch floor: the time of an empty recorded program with the step's dispatch count (and its
transfers), each dispatch the smallest kernel there is.

    python bench/generate_bench.py                      # lavapipe-sized: prompt 128, 16 new tokens
    python bench/generate_bench.py --models tf,tf-23.7m,evermind,mamba --batch 1,8,32 --json --out r.json

Greedy decoding (the device sampler's argmax; temperature does not change the step's work). Prefill tokens/s
counts the prompt tokens a prefill ran; decode tokens/s the tokens of all sequences after the first.
Timings on a shared machine are noisy; each number is the best of --repeats timed runs after a warm-up run
(which records our programs). ms/step is the time of one decode step of the whole batch (one submit);
floor ms the launch floor of that program."""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback

import numpy as np

import evermind_vk as ev
from evermind_vk.models import EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel, LMConfig, TransformerLM
from evermind_vk.runtime import knobs, record
from evermind_vk.runtime.select import decode as select_decode
from evermind_vk.runtime.kernels import fill_words
from evermind_vk.train import generate
from evermind_vk.train.decode import decoder

try:
    import torch
    from torch_decode import TorchEvermind, TorchMamba, TorchTransformer  # bench/ is on sys.path as a script
except ImportError:  # pragma: no cover
    torch = None

MODELS = {
    "tf": lambda: TransformerLM(LMConfig()),  # the CLI's default model
    "tf-23.7m": lambda: TransformerLM(LMConfig(d_model=512, n_layers=8, n_heads=8, n_kv_heads=4, d_ff=1408)),
    "evermind": lambda: EvermindLM(EvermindLMConfig(256)),
    "evermind-d512": lambda: EvermindLM(EvermindLMConfig(256, d_model=512, num_layers=8)),
    "mamba": lambda: HybridMambaModel(HybridMambaConfig()),
    "mamba-attn": lambda: HybridMambaModel(HybridMambaConfig(layers=("mamba1", "attention"))),
}


def ev_rates(m, prompts, new: int, repeats: int) -> dict:
    """Our prefill and decode tokens/s for a batch of prompts (one: generate's single-prompt form), the best
    of `repeats` timed runs each."""
    one = prompts[0] if len(prompts) == 1 else prompts
    generate(m, one, max_new_tokens=2)  # records the prefill and the decode step
    pre = dec = 0.0
    for _ in range(repeats):
        st = {}
        generate(m, one, max_new_tokens=new, stats=st)
        pre = max(pre, st["prefill_tokens"] / st["prefill_s"])
        dec = max(dec, st["decode_tokens"] / st["decode_s"])
    out = dict(prefill=pre, decode=dec, step_ms=1e3 * len(prompts) / dec)
    d = decoder(m, len(prompts))
    prog = d.step_program()  # None where a step runs eagerly (HybridMamba with attention layers)
    if prog is not None:
        floor, out["dispatches"] = launch_floor(m.device, prog)
        out["floor_ms"] = floor
    return out


def launch_floor(dev, prog, reps: int = 30):
    """ms of an empty recorded program with prog's dispatch count and transfers."""
    n = sum(1 for lab in prog.labels if lab not in ("upload", "download"))
    ups = prog.labels.count("upload")
    downs = prog.labels.count("download")
    bufs = [ev.empty((1,), "u32", dev, host_visible=True) for _ in range(max(ups, downs, 1))]
    t = ev.empty((1,), "u32", dev)
    with record(dev) as empty_prog:
        for b in bufs[:ups]:
            dev.upload(b)
        for _ in range(n):
            fill_words(t, 0)
        for b in bufs[:downs]:
            dev.sync_local(b)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            empty_prog.run()
        best = min(best, (time.perf_counter() - t0) / reps)
    return 1e3 * best, n


def uncached_rate(m, prompt, new: int, repeats: int) -> float:
    """Decode tokens/s of generate(use_cache=False): a forward of the whole context per token."""
    generate(m, prompt, max_new_tokens=1, use_cache=False)
    best = 0.0
    for _ in range(repeats):
        st = {}
        generate(m, prompt, max_new_tokens=new, use_cache=False, stats=st)
        best = max(best, st["decode_tokens"] / st["decode_s"])
    return best


def torch_rates(name, m, B: int, P: int, new: int, dev: str, compiled: bool, repeats: int) -> dict:
    """PyTorch eager (and compiled) prefill and decode tokens/s of the same architecture and weights."""
    sd = m.state_dict()
    ids = torch.randint(0, m.config.vocab_size, (B, P), device=dev)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    out = {}
    with torch.no_grad():
        if name.startswith("tf"):
            tm = TorchTransformer(sd, m.config, dev, B, P + new)
            run_prefill = lambda: tm.forward(ids, 0)  # noqa: E731
            def run_decode(nxt, i):
                return tm.forward(nxt[:, None], P + i).argmax(-1)
        elif name.startswith("evermind"):
            tm = TorchEvermind(sd, m.config, dev)
            run_prefill = lambda: tm.forward(ids)  # noqa: E731
            def run_decode(nxt, i):
                return tm.step(nxt).argmax(-1)  # one new row a sequence from the carried conv windows
        elif name.startswith("mamba"):
            tm = TorchMamba(sd, m.config, dev, B)

            def run_prefill():
                tm.reset()
                for t in range(P):
                    z = tm.step(ids[:, t])
                return z
            def run_decode(nxt, i):
                return tm.step(nxt).argmax(-1)
        else:
            return out
        pre = dec = 0.0
        for timed in range(1 + repeats):  # a warm-up run, then the best of `repeats`
            sync()
            t0 = time.perf_counter()
            nxt = run_prefill().argmax(-1)
            nxt.cpu()
            t1 = time.perf_counter()
            for i in range(new - 1):
                nxt = run_decode(nxt, i)
                nxt.cpu()  # the chosen ids come back every step, as ours
            t2 = time.perf_counter()
            if timed:
                pre, dec = max(pre, B * P / (t1 - t0)), max(dec, B * (new - 1) / (t2 - t1))
        out["eager_prefill"], out["eager_decode"] = pre, dec
        if compiled and name.startswith("tf"):
            try:
                out["compile_decode"] = compiled_rate(tm, B, P, new, sync)
            except Exception as e:  # torch.compile does not run everywhere: the eager numbers stand
                out["compile_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def compiled_rate(tm, B, P, new, sync) -> float:
    """Decode tokens/s of the static-shape step under torch.compile(mode="reduce-overhead"): CUDA graphs."""
    step = torch.compile(tm.step_static, mode="reduce-overhead", fullgraph=True)
    nxt = torch.zeros(B, 1, dtype=torch.long, device=tm.dev)
    for i in range(3):  # compile and capture
        step(nxt, torch.tensor(P + i, device=tm.dev))
    sync()
    t0 = time.perf_counter()
    for i in range(new - 1):
        nxt = step(nxt, torch.tensor(P + i, device=tm.dev))[:, None]
        nxt.cpu()
    return B * (new - 1) / (time.perf_counter() - t0)


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="tf,evermind,mamba", help=f"comma list of {', '.join(MODELS)}")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--uncached-new", type=int, default=4, help="tokens timed on the uncached path (B = 1, tf)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per number (the best is kept)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                    help="torch.compile (CUDA graphs) of the decode step: auto = on CUDA only")
    ap.add_argument("--json", action="store_true", help="print the results as JSON after the table")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args()
    dev = ev.get_device()
    threads = int(os.environ.get("LP_NUM_THREADS", os.cpu_count() or 1))
    tdev = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    if torch is not None:
        torch.set_num_threads(threads)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    head = dict(device=dev.info.name, machine=f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus",
                torch=None if torch is None else f"{torch.__version__} on {tdev}, {threads} threads",
                load=" ".join(f"{x:.1f}" for x in os.getloadavg()), commit=commit, command=" ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                knobs=" ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("EVERMIND_VK_")) or "none set",
                chain=f"up to {select_decode.chain_tokens(dev.info.type, knobs.get('EVERMIND_VK_DECODE_CHAIN'))} "
                      "decode steps a replay")
    for k, v in head.items():
        print(f"{k}: {v}")
    print(" | ".join(COLS), flush=True)
    rows = []
    for name in a.models.split(","):
        for B in map(int, a.batch.split(",")):
            rows.append(run_one(name, B, a, tdev))
            print_row(rows[-1])
    print("\nall rows, " + LEGEND)
    print(" | ".join(COLS))
    for r in rows:
        print_row(r)
    res = dict(head, rows=rows)
    if a.json:
        print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


def run_one(name, B, a, tdev) -> dict:
    """One table row: model `name` at batch B, ours and PyTorch's."""
    row = dict(model=name, batch=B)
    try:
        m = MODELS[name]()
        rng = np.random.default_rng(B)
        # different lengths in a batch (the last is the full prompt), as generate() allows
        prompts = [rng.integers(0, m.config.vocab_size, a.prompt - (b * 7) % max(1, a.prompt // 4)).tolist()
                   for b in range(B)][::-1]
        row["params"] = m.num_parameters()
        row.update(ev_rates(m, prompts, a.new, a.repeats))
        if B == 1 and name.startswith("tf"):
            row["uncached"] = uncached_rate(m, prompts[-1], a.uncached_new, a.repeats)
        if torch is not None and not a.no_torch:
            compiled = a.compile == "on" or (a.compile == "auto" and tdev == "cuda")
            row.update(torch_rates(name, m, B, a.prompt, a.new, tdev, compiled, a.repeats))
    except Exception as e:  # one failing row says why; the rest still run
        row["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    return row


COLS = ("model", "B", "prefill", "decode", "uncached", "x uncached", "torch prefill", "torch decode",
        "compiled", "x eager", "ms/step", "floor ms", "x floor")
LEGEND = ("tokens/s; x uncached = decode / uncached; x eager = decode / torch eager decode; "
          "x floor = ms/step / floor ms")


def print_row(r) -> None:
    """One result row of the table (printed as soon as it is measured)."""
    if "error" in r:
        print(f"{r['model']} | {r['batch']} | error: {r['error']}", flush=True)
        return
    ratio = lambda a, b: None if r.get(a) is None or not r.get(b) else r[a] / r[b]  # noqa: E731
    print(" | ".join([r["model"], str(r["batch"]), fmt(r.get("prefill")), fmt(r.get("decode")),
                      fmt(r.get("uncached")), fmt(ratio("decode", "uncached"), ".2f"),
                      fmt(r.get("eager_prefill")), fmt(r.get("eager_decode")), fmt(r.get("compile_decode")),
                      fmt(ratio("decode", "eager_decode"), ".2f"), fmt(r.get("step_ms"), ".2f"),
                      fmt(r.get("floor_ms"), ".2f"), fmt(ratio("step_ms", "floor_ms"), ".2f")]), flush=True)


if __name__ == "__main__":
    main()
