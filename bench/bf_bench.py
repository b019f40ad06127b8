#!/usr/bin/env python3
"""builderforce's EvermindLM on evermind-vk vs the same model in PyTorch eager (CUDA if visible, else CPU),
same weights (the logits are compared first), same run: training tokens/s (EvermindLMTrainer, one sequence
per AdamW step, builderforce's loop) and greedy generation tokens/s (both recompute the whole prefix per
token, as builderforce's generate does).

    python bench/bf_bench.py                                         # lavapipe-sized
    python bench/bf_bench.py --d-model 512 --layers 8 --hidden 1024 --experts 8 --seq-len 512 \\
        --steps 30 --gen 64                                           # a GPU
"""
import argparse
import json
import time

import numpy as np

from evermind_vk.models import EvermindLM, EvermindLMConfig
from evermind_vk.runtime import tensor
from evermind_vk.train import EvermindLMTrainer

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def torch_model(m: EvermindLM, dev):
    c = m.config
    sd = {k: torch.tensor(v, device=dev) for k, v in m.state_dict().items()}
    params = {k: torch.nn.Parameter(v) for k, v in sd.items()}
    E, k = c.num_experts, c.top_k

    def rms(x, g):
        return g * x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5)

    def moe(x, P):
        logits = x @ params[P + "wr"].T
        top, idx = torch.topk(logits, k, dim=-1)
        gates = torch.zeros_like(logits).scatter(-1, idx, torch.softmax(top, -1))
        def ffn(n):
            return torch.relu(x @ params[f"{P}{n}.w1"].T + params[f"{P}{n}.b1"]) @ params[f"{P}{n}.w2"].T + params[f"{P}{n}.b2"]
        out = ffn("shared")
        for e in range(E):  # dense over experts, masked by the gates (as evermind-vk computes them)
            out = out + gates[:, e:e + 1] * ffn(f"expert{e}")
        return out

    def forward(ids):
        x = params["emb"][ids]
        T = x.shape[0]
        for i in range(c.num_layers):
            P = f"layer{i}."
            n = rms(x, params[P + "nConv"])
            ker = params[P + "conv"]  # [d, K], tap j reads t - j
            pad = torch.nn.functional.pad(n.T[None], (c.conv_kernel - 1, 0))  # [1, d, T + K - 1]
            conv = torch.nn.functional.conv1d(pad, ker.flip(1)[:, None, :], groups=c.d_model)[0].T[:T]
            a = x + conv
            x = a + moe(rms(a, params[P + "nMoe"]), P + "moe.")
        return x @ params["emb"].T
    return forward, list(params.values())


def rate(fn, n, warm=1):
    for _ in range(warm):
        fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--experts", type=int, default=4)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--gen", type=int, default=8, help="tokens generated after a 16-token prompt")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args()
    m = EvermindLM(EvermindLMConfig(a.vocab, a.d_model, a.layers, 3, a.hidden, a.experts, a.top_k, seed=1))
    rng = np.random.default_rng(0)
    seq = rng.integers(0, a.vocab, a.seq_len + 1).tolist()
    res = {"config": vars(a), "device": m.device.info.name}
    ours = m.forward(tensor(np.array(seq[:-1], np.uint32))).numpy()
    tr = EvermindLMTrainer(m, lr=1e-3)
    res["evermind_vk_train_tokens_per_s"] = a.seq_len * rate(lambda: tr.fit([seq]), a.steps)
    prompt = seq[:16]
    res["evermind_vk_generate_tokens_per_s"] = a.gen * rate(lambda: m.generate(prompt, a.gen), 1)
    if torch is not None:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        fresh = EvermindLM(EvermindLMConfig(a.vocab, a.d_model, a.layers, 3, a.hidden, a.experts, a.top_k, seed=1))
        fwd, params = torch_model(fresh, dev)
        ids = torch.tensor(seq, device=dev)
        with torch.no_grad():
            tl = fwd(ids[:-1]).cpu().numpy()
        res["max_abs_logit_diff_vs_torch"] = float(np.abs(tl - ours).max())
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)

        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(fwd(ids[:-1]), ids[1:]).backward()
            opt.step()
            if dev == "cuda":
                torch.cuda.synchronize()
        res["torch_device"] = dev
        res["torch_train_tokens_per_s"] = a.seq_len * rate(step, a.steps)

        def gen():
            t = list(prompt)
            with torch.no_grad():
                for _ in range(a.gen):
                    t.append(int(fwd(torch.tensor(t, device=dev))[-1].argmax()))
        res["torch_generate_tokens_per_s"] = a.gen * rate(gen, 1)
    print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
