#!/usr/bin/env python3
"""evermind-vk against IREE (the same PyTorch model compiled through iree-turbine to Vulkan SPIR-V) and
PyTorch CPU eager, in one run, on the same Vulkan device (lavapipe here): one training step of the
bench/train_bench.py TransformerLM, and causal attention forward + backward.

    .venv/bin/python bench/iree_bench.py --iree-python /work/iree-venv/bin/python   # or EVERMIND_VK_IREE_PYTHON

IREE is a benchmark-only dependency in a virtualenv of its own (bench/requirements-iree.txt); this
process never imports it. It starts `IREE_PYTHON bench/iree_bench.py --worker` (which imports torch and
iree only, and the model from bench/torch_lm.py, the definition bench/train_bench.py uses), sends it
commands on stdin and reads one JSON line back per command. The rounds interleave evermind-vk, PyTorch
and IREE, so that load from other processes hits all three alike; medians over --reps rounds. The worker is
frozen (SIGSTOP) while evermind-vk and PyTorch run, since its idle threads busy-wait on lavapipe
(Worker.freeze; --iree-running leaves it running, and the summary prints its CPU use either way).

What IREE runs: one function per training step, traced with make_fx from the PyTorch model (forward,
autograd's backward, gradient clipping to 1.0 and AdamW with lr 1e-3, weight decay 1e-2, as the
evermind-vk Trainer and the PyTorch baseline) and compiled with `iree-compile --iree-hal-target-device=vulkan`
(default Vulkan target); the state (weights, moments) stays on the device between steps (outputs fed back
as inputs). Its first steps are checked against the same step run eagerly in PyTorch in the worker.
What we had to change for lavapipe (each gave wrong numbers with no error, found by that check):
  * `--vulkan_cached_bda_replay_instances=0` (IREE 3.13 runtime): with the cached command-buffer replay,
    the second call of a function read inputs as zeros or wrote over them (NaN weights by the second step);
  * `aten.any.dim` decomposed to `amax(x.float()) > 0`: IREE's Vulkan `any` over booleans returns wrong
    rows on lavapipe (SDPA's math path uses it for fully masked rows);
  * the loss sum and the squared-gradient sums as row sums, then a sum over rows: IREE reduces a whole
    tensor in one invocation's loop, which lavapipe ends after 65,535 iterations (a sum of 131,072 ones
    gave 65,535) -- the loop cap evermind-vk plans every launch around;
  * int32 token ids (the default target has no int64), targets as a one-hot mask built in the graph,
    embedding backward as `index_add` with int32 indices, SDPA traced through its math path (the fused
    CPU kernel does not lower), constants (RoPE tables, the causal mask) folded before export.
Results from the device come back through a host-visible staging buffer (DeviceArray.to_host() fails on
lavapipe: host pointer alignment 4096).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LR, BETAS, EPS, WD, CLIP = 1e-3, (0.9, 0.999), 1e-8, 1e-2, 1.0


def model_fields(cfg) -> dict:
    return {k: getattr(cfg, k) for k in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff",
                                          "head_dim", "norm_eps", "rope_theta")}


# ------------------------------------------------------------------------------------------------------
# The worker: runs in the IREE virtualenv; imports torch, iree and bench/torch_lm.py, never evermind_vk.
# ------------------------------------------------------------------------------------------------------
class IreeWorker:
    def __init__(self, spec: dict):
        import types

        import numpy as np
        import torch
        import iree.runtime as rt
        sys.path.insert(0, HERE)
        from torch_lm import torch_model
        self.np, self.torch, self.rt = np, torch, rt
        self.workdir = spec["workdir"]
        rt.flags.parse_flags("--vulkan_cached_bda_replay_instances=0")
        self.config = rt.Config("vulkan")
        self.dev = self.config.device
        cfg = types.SimpleNamespace(**spec["model"])
        self.cfg, self.B, self.L = cfg, spec["batch"], spec["seq_len"]
        torch.manual_seed(0)
        self.model = torch_model(cfg, "cpu")
        self.names = [n for n, _ in self.model.named_parameters()]
        params = [p.detach().clone() for _, p in self.model.named_parameters()]
        ids = np.asarray(spec["ids"], np.int32)
        B, L = self.B, self.L
        self.ids = torch.tensor(ids[: B * L].reshape(B, L))
        self.tgt = torch.tensor(ids[1: B * L + 1].reshape(B, L))
        self.state0 = params + [torch.zeros_like(p) for p in params] + [torch.zeros_like(p) for p in params]
        self.info = {"torch": torch.__version__, "iree_runtime": _version("iree-base-runtime"),
                     "iree_compiler": _version("iree-base-compiler"), "iree_turbine": _version("iree-turbine"),
                     "device": str(self.dev)}
        t0 = time.perf_counter()
        self.train_fn = self._compile("train_step", self._train_step,
                                      (torch.tensor(1.0), self.ids, self.tgt, *self.state0))
        self.info["compile_train_s"] = time.perf_counter() - t0
        self.info["check"] = self._check_train()
        self.dev_state = [self._put(x) for x in self.state0]
        self.t_step = 0
        S, H, KVH, D = spec["attn"]
        g = torch.Generator().manual_seed(1)
        self.attn_args = tuple(torch.randn(shape, generator=g) for shape in
                               ((1, H, S, D), (1, KVH, S, D), (1, KVH, S, D), (1, H, S, D)))
        t0 = time.perf_counter()
        self.attn_fn = self._compile("attention", self._attention, self.attn_args)
        self.info["compile_attention_s"] = time.perf_counter() - t0
        want = self._attention(*self.attn_args)
        got = self.attn_fn(*[self._put(a) for a in self.attn_args])
        self.info["attention_max_abs_err"] = max(float(np.abs(self._host(o) - w.detach().numpy()).max())
                                                 for o, w in zip(got, want))
        self.attn_dev = [self._put(a) for a in self.attn_args]

    # -- the functions IREE compiles ---------------------------------------------------------------------
    def _loss(self, logits, tgt):
        torch, V = self.torch, self.cfg.vocab_size
        logp = torch.log_softmax(logits.reshape(-1, V), -1)
        onehot = (tgt.reshape(-1, 1) == torch.arange(V, dtype=torch.int32)[None]).to(logp.dtype)
        return -(logp * onehot).sum(-1).sum() / onehot.shape[0]  # row sums first: lavapipe's loop cap

    def _train_step(self, t, ids, tgt, *state):
        torch = self.torch
        from torch.func import functional_call
        n = len(self.names)
        ps = [p.requires_grad_() for p in state[:n]]
        ms, vs = state[n:2 * n], state[2 * n:]
        loss = self._loss(functional_call(self.model, dict(zip(self.names, ps)), (ids,)), tgt)
        gs = torch.autograd.grad(loss, ps)
        norm = torch.sqrt(sum((g * g).reshape(g.shape[0], -1).sum(-1).sum() for g in gs))
        scale = torch.clamp(CLIP / (norm + 1e-6), max=1.0)
        b1, b2 = BETAS
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        new_p, new_m, new_v = [], [], []
        for p, g, m, v in zip(ps, gs, ms, vs):
            g = g * scale
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            new_p.append(p.detach() * (1 - LR * WD) - LR * (m / bc1) / (torch.sqrt(v / bc2) + EPS))
            new_m.append(m)
            new_v.append(v)
        return (loss.detach(), *new_p, *new_m, *new_v)

    def _attention(self, q, k, v, do):
        torch = self.torch
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        G = q.shape[1] // k.shape[1]
        o = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1),
                                                             is_causal=True)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
        return o.detach(), dq, dk, dv

    # -- tracing, compiling, running ---------------------------------------------------------------------
    def _compile(self, name, fn, args):
        torch, rt = self.torch, self.rt
        from torch._decomp import core_aten_decompositions
        from torch.fx.experimental.proxy_tensor import make_fx
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import iree.turbine.aot as aot
        aten = torch.ops.aten

        def embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
            g = grad.reshape(-1, grad.shape[-1])
            return torch.zeros(num_weights, g.shape[1], dtype=grad.dtype).index_add(0, indices.reshape(-1), g)

        def any_dim(x, dim, keepdim=False):  # IREE's Vulkan `any` over booleans is wrong on lavapipe
            return x.to(torch.float32).amax(dim, keepdim) > 0

        dec = dict(core_aten_decompositions())
        dec[aten.embedding_dense_backward.default] = embedding_dense_backward
        dec[aten.any.dim] = any_dim
        def traced(*a):  # make_fx wants a plain function, not a bound method
            return fn(*a)

        with sdpa_kernel(SDPBackend.MATH):
            gm = make_fx(traced, decomposition_table=dec)(*args)
        _fold_constants(torch, gm)
        mlir = os.path.join(self.workdir, name + ".mlir")
        vmfb = os.path.join(self.workdir, name + ".vmfb")
        aot.export(gm, *args).save_mlir(mlir)
        exe = os.path.join(os.path.dirname(sys.executable), "iree-compile")
        subprocess.run([exe, mlir, "--iree-hal-target-device=vulkan", "-o", vmfb], check=True,
                       stdout=subprocess.DEVNULL)
        ctx = rt.SystemContext(config=self.config)
        with open(vmfb, "rb") as f:
            ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, f.read()))
        self._ctx = getattr(self, "_ctx", []) + [ctx]
        return ctx.modules.module.main

    def _put(self, x):
        a = x.detach().numpy() if hasattr(x, "detach") else x
        return self.rt.asdevicearray(self.dev, a)

    def _host(self, x):
        """A device array's contents through a host-visible staging buffer (to_host() fails on lavapipe)."""
        rt = self.rt
        bv = x._buffer_view
        dst = self.dev.allocator.allocate_buffer(
            memory_type=rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE,
            allowed_usage=rt.BufferUsage.TRANSFER | rt.BufferUsage.MAPPING, allocation_size=bv.byte_length)
        sem = self.dev.create_semaphore(0)
        self.dev.queue_copy(bv.get_buffer(), dst, [], [(sem, 1)])
        sem.wait(1)
        return rt.HalBufferView(dst, x.shape, bv.element_type).map().asarray(x.shape, x.dtype).copy()

    def _check_train(self, steps: int = 3) -> dict:
        """IREE's first steps against the same step run eagerly by PyTorch (losses, then the weights)."""
        torch, np = self.torch, self.np
        eager = [s.detach().clone() for s in self.state0]
        cur = [self._put(s) for s in self.state0]
        out = {"eager_losses": [], "iree_losses": []}
        for i in range(steps):
            t = torch.tensor(float(i + 1))
            r = self._train_step(t, self.ids, self.tgt, *eager)
            eager = [x.detach() for x in r[1:]]
            o = self.train_fn(self._put(t), self._put(self.ids), self._put(self.tgt), *cur)
            cur = list(o[1:])
            out["eager_losses"].append(float(r[0]))
            out["iree_losses"].append(float(self._host(o[0])))
        n = len(self.names)
        out["max_abs_weight_diff"] = max(float(np.abs(self._host(c) - e.numpy()).max())
                                         for c, e in zip(cur[:n], eager[:n]))
        return out

    def train(self, steps: int) -> dict:
        np = self.np
        ids, tgt = self._put(self.ids), self._put(self.tgt)
        ts = [self._put(np.array(float(self.t_step + i + 1), np.float32)) for i in range(steps)]
        t0 = time.perf_counter()
        for i in range(steps):
            o = self.train_fn(ts[i], ids, tgt, *self.dev_state)
            self.dev_state = list(o[1:])
        loss = float(self._host(o[0]))  # waits for the last step
        self.t_step += steps
        return {"s": time.perf_counter() - t0, "loss": loss}

    def attention(self, reps: int) -> dict:
        t0 = time.perf_counter()
        for _ in range(reps):
            o = self.attn_fn(*self.attn_dev)
        self._host(o[1])
        return {"s": (time.perf_counter() - t0) / reps}


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return "absent"


def _fold_constants(torch, gm) -> int:
    """Evaluate every node that depends on no input (RoPE tables, the causal mask, zeros) and store the
    tensors as buffers: their int64 index arithmetic has no lowering on the default Vulkan target."""
    g, const, n = gm.graph, {}, 0
    for nd in list(g.nodes):
        if nd.op == "call_function" and all(d in const for d in nd.all_input_nodes):
            args = torch.fx.node.map_arg(nd.args, lambda a: const[a])
            kwargs = torch.fx.node.map_arg(nd.kwargs, lambda a: const[a])
            const[nd] = nd.target(*args, **kwargs)
    for nd, val in const.items():
        if isinstance(val, torch.Tensor) and any(u not in const for u in nd.users):
            name = f"_folded{n}"
            n += 1
            gm.register_buffer(name, val.contiguous())
            with g.inserting_before(nd):
                new = g.get_attr(name)
            nd.replace_all_uses_with(new)
    g.eliminate_dead_code()
    gm.recompile()
    return n


def worker_main() -> None:
    spec = json.loads(sys.stdin.readline())
    w = IreeWorker(spec)
    print(json.dumps(w.info), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "quit":
            break
        res = w.train(cmd["steps"]) if cmd["cmd"] == "train" else w.attention(cmd["reps"])
        print(json.dumps(res), flush=True)


# ------------------------------------------------------------------------------------------------------
# The parent: the project's virtualenv (evermind_vk, torch); IREE only through the worker.
# ------------------------------------------------------------------------------------------------------
class Worker:
    def __init__(self, python: str, spec: dict):
        self.p = subprocess.Popen([python, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=HERE)
        self.info = self.ask(spec)

    def ask(self, msg: dict) -> dict:
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the IREE worker ended (exit code {self.p.wait()}); its stderr is above")
        return json.loads(line)

    def cpu_seconds(self) -> float:
        """The worker's CPU time so far (user + system, all its threads), from /proc/PID/stat."""
        with open(f"/proc/{self.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def freeze(self, on: bool) -> None:
        """SIGSTOP / SIGCONT the worker. IREE 3.13 on lavapipe (Mesa 22.3) keeps two threads busy-waiting
        in lavapipe's semaphore wait (clock_gettime polls, seen with gdb) for as long as its device
        lives, idle or not: ~200% CPU measured from /proc while the worker waited on stdin, on the
        2-core machine where evermind-vk and PyTorch are timed beside it. Frozen (the default),
        it takes no CPU while they run. One early run saw IREE's own step ~1.5x slower frozen; two later pairs
        of runs did not (3,903 and 4,102 tokens/s frozen, 3,615 and 3,808 running), while the running worker
        halved evermind-vk's and PyTorch's numbers."""
        import signal
        os.kill(self.p.pid, signal.SIGSTOP if on else signal.SIGCONT)

    def close(self):
        self.freeze(False)
        try:
            self.p.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.p.stdin.close()
        finally:
            self.p.wait(timeout=60)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iree-python", default=os.environ.get("EVERMIND_VK_IREE_PYTHON", ""),
                    help="python of the IREE virtualenv (default: $EVERMIND_VK_IREE_PYTHON)")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--d-ff", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5, help="training steps per timed round")
    ap.add_argument("--attn", type=int, nargs=4, default=[128, 4, 2, 64], metavar=("S", "H", "KVH", "HD"))
    ap.add_argument("--attn-reps", type=int, default=5, help="attention calls per timed round")
    ap.add_argument("--reps", type=int, default=5, help="interleaved rounds (medians reported)")
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="PyTorch CPU threads (default: its own choice; 1 avoids OpenMP barrier stalls on a shared machine)")
    ap.add_argument("--iree-running", action="store_true",
                    help="leave the IREE worker running while evermind-vk and PyTorch are timed. Its idle threads "
                         "busy-wait in lavapipe (Worker.freeze) and take the cores they run on: measured, that "
                         "halved evermind-vk's and PyTorch's numbers and left IREE's own unchanged "
                         "(bench/results/iree_bench-lavapipe.txt). Default: the worker is frozen (SIGSTOP) meanwhile")
    ap.add_argument("--freeze-iree", action="store_true", help="the default; kept so that older commands still run")
    ap.add_argument("--json", default="", help="also write the results here")
    a = ap.parse_args(argv)
    if not a.iree_python:
        ap.error("give the IREE virtualenv's python: --iree-python PATH or EVERMIND_VK_IREE_PYTHON")

    import tempfile

    import numpy as np
    import torch

    import evermind_vk as ev
    from evermind_vk import ops
    from evermind_vk.models import LMConfig, TransformerLM
    from evermind_vk.train import Trainer
    from torch_lm import torch_model

    cfg = LMConfig(d_model=a.d_model, n_layers=a.layers, n_heads=a.heads, n_kv_heads=a.kv_heads, d_ff=a.d_ff,
                   max_seq_len=a.seq_len)
    B, L = a.batch, a.seq_len
    tokens = B * L * a.steps
    ids = np.random.default_rng(0).integers(0, 256, B * L * (a.steps + 2) + 1)
    S, H, KVH, D = a.attn

    # IREE worker first (its compile takes the longest; nothing of ours is running meanwhile)
    workdir = tempfile.mkdtemp(prefix="iree_bench_")
    t0 = time.perf_counter()
    w = Worker(a.iree_python, {"workdir": workdir, "model": model_fields(cfg), "batch": B, "seq_len": L,
                               "ids": ids[: B * L + 1].tolist(), "attn": [S, H, KVH, D]})
    print(f"IREE worker ready in {time.perf_counter() - t0:.1f} s: {json.dumps(w.info)}", flush=True)
    freeze = not a.iree_running
    if a.freeze_iree and a.iree_running:
        ap.error("--freeze-iree and --iree-running contradict each other")

    def ask_iree(msg):
        if freeze:
            w.freeze(False)
        try:
            return w.ask(msg)
        finally:
            if freeze:
                w.freeze(True)
    if freeze:
        w.freeze(True)

    # evermind-vk: the Trainer (as `evermind-vk train` and bench/train_bench.py)
    model = TransformerLM(cfg)
    tr = Trainer(model)
    tr.train(ids[: B * L * 2 + 1], epochs=1, seq_len=L, batch_size=B, lr=LR, max_grad_norm=CLIP)  # record, warm up
    # evermind-vk attention fwd+bwd, recorded once and replayed (one submit per call)
    rng = np.random.default_rng(1)
    q, k, v, do = (ev.tensor(rng.standard_normal(s).astype(np.float32)) for s in
                   ((S, H, D), (S, KVH, D), (S, KVH, D), (S, H, D)))
    with ev.record(run=False) as attn_prog:
        o, saved = ops.attention(q, k, v, causal=True)
        ops.attention_backward(q, k, v, do, saved, causal=True, out=o)
    attn_prog.run()

    # PyTorch CPU eager, the same model and step
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    tm = torch_model(cfg, "cpu")
    opt = torch.optim.AdamW(tm.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    x = torch.tensor(ids[: B * L].reshape(B, L))
    y = torch.tensor(ids[1: B * L + 1].reshape(B, L))

    def torch_step():
        loss = torch.nn.functional.cross_entropy(tm(x).view(-1, cfg.vocab_size), y.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tm.parameters(), CLIP)
        opt.step()
    for _ in range(2):
        torch_step()
    tq = torch.randn(1, H, S, D, requires_grad=True)
    tk = torch.randn(1, KVH, S, D, requires_grad=True)
    tv = torch.randn(1, KVH, S, D, requires_grad=True)
    tdo = torch.randn(1, H, S, D)

    def torch_attn():
        G = H // KVH
        o = torch.nn.functional.scaled_dot_product_attention(tq, tk.repeat_interleave(G, 1),
                                                             tv.repeat_interleave(G, 1), is_causal=True)
        torch.autograd.grad(o, (tq, tk, tv), tdo)
    torch_attn()

    rows = {k_: [] for k_ in ("ev_train", "torch_train", "iree_train", "ev_attn", "torch_attn", "iree_attn")}
    busy = []  # the IREE worker's CPU seconds per wall second while evermind-vk and PyTorch trained
    for r in range(a.reps):
        c0, t0 = w.cpu_seconds(), time.perf_counter()
        tr.train(ids[: tokens + 1], epochs=1, seq_len=L, batch_size=B, lr=LR, max_grad_norm=CLIP)
        rows["ev_train"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(a.steps):
            torch_step()
        rows["torch_train"].append(time.perf_counter() - t0)
        busy.append((w.cpu_seconds() - c0) / (rows["ev_train"][-1] + rows["torch_train"][-1]))
        rows["iree_train"].append(ask_iree({"cmd": "train", "steps": a.steps})["s"])
        t0 = time.perf_counter()
        for _ in range(a.attn_reps):
            attn_prog.run()
        rows["ev_attn"].append((time.perf_counter() - t0) / a.attn_reps)
        t0 = time.perf_counter()
        for _ in range(a.attn_reps):
            torch_attn()
        rows["torch_attn"].append((time.perf_counter() - t0) / a.attn_reps)
        rows["iree_attn"].append(ask_iree({"cmd": "attention", "reps": a.attn_reps})["s"])
        print(f"round {r + 1}/{a.reps}: " + ", ".join(f"{k_} {v_[-1] * 1e3:.1f} ms" for k_, v_ in rows.items()),
              flush=True)
    w.close()
    med = {k_: statistics.median(v_) for k_, v_ in rows.items()}
    tps = {k_: tokens / med[k_ + "_train"] for k_ in ("ev", "torch", "iree")}
    print(f"\nPyTorch {torch.__version__} on {torch.get_num_threads()} CPU threads; IREE worker "
          f"{'frozen (SIGSTOP) while the others ran' if freeze else 'left running throughout'}, using "
          f"{100 * statistics.median(busy):.0f}% of a core meanwhile (median over rounds; {os.cpu_count()} cores)")
    print(f"model {model.num_parameters():,} parameters, batch {B} x {L} tokens, {a.steps} steps per round, "
          f"medians of {a.reps} interleaved rounds; device {model.device.info.name}")
    print(f"training step  evermind-vk {tps['ev']:8,.0f} tokens/s | IREE (Vulkan) {tps['iree']:8,.0f} | "
          f"PyTorch CPU eager {tps['torch']:8,.0f}")
    print(f"  evermind-vk / IREE {tps['ev'] / tps['iree']:.2f}x   evermind-vk / PyTorch CPU {tps['ev'] / tps['torch']:.3f}x   "
          f"IREE / PyTorch CPU {tps['iree'] / tps['torch']:.3f}x")
    print(f"attention fwd+bwd S={S} H={H} KVH={KVH} hd={D} causal  evermind-vk {med['ev_attn'] * 1e3:.1f} ms | "
          f"IREE {med['iree_attn'] * 1e3:.1f} ms | PyTorch CPU SDPA {med['torch_attn'] * 1e3:.1f} ms")
    print(f"  IREE / evermind-vk time {med['iree_attn'] / med['ev_attn']:.2f}x   "
          f"PyTorch / evermind-vk time {med['torch_attn'] / med['ev_attn']:.2f}x")
    out = {"config": cfg.to_dict(), "batch": B, "seq_len": L, "steps": a.steps, "reps": a.reps,
           "device": model.device.info.name, "iree": w.info, "rounds_s": rows, "median_s": med,
           "tokens_per_s": tps, "ratio_ev_over_iree": tps["ev"] / tps["iree"],
           "ratio_ev_over_torch_cpu": tps["ev"] / tps["torch"], "torch_threads": torch.get_num_threads(), "iree_frozen_between": freeze,
           "iree_worker_cpu_while_others_trained": statistics.median(busy), "attention": {"S": S, "H": H, "KVH": KVH, "D": D}}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker_main()
    else:
        main()
