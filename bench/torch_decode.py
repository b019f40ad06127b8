"""PyTorch twins of evermind-vk's generation, for bench/generate_bench.py: a TransformerLM decoding with a
KV cache (eager; and a static-shape step for torch.compile with CUDA graphs), and an EvermindLM decoding from
its per-layer conv windows (each sequence's last conv_kernel - 1 conv inputs, carried: one new row a step, as
ours). Weights are copied from the
evermind-vk model's state_dict, greedy choice on the device, the chosen ids read back each step."""
import torch
import torch.nn.functional as Fn


def _rms(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


class TorchTransformer:
    """TransformerLM (tied or untied head, RMSNorm, half-split RoPE, GQA, row-split SwiGLU) with a KV cache
    of B sequences x max_len positions."""

    def __init__(self, sd: dict, cfg, dev, B: int, max_len: int):
        self.c, self.dev, self.B, self.L = cfg, dev, B, max_len
        self.W = {k: torch.tensor(v, device=dev) for k, v in sd.items()}
        KVH, hd = cfg.n_kv_heads, cfg.head_dim
        self.k = [torch.zeros(B, max_len, KVH, hd, device=dev) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(B, max_len, KVH, hd, device=dev) for _ in range(cfg.n_layers)]
        for c in self.k + self.v:  # the step writes the caches in place: CUDA graphs replay only fixed addresses
            torch._dynamo.mark_static_address(c)  # (else inductor skips its graphs: "mutated inputs")
        half = hd // 2
        self.inv = cfg.rope_theta ** (-2 * torch.arange(half, device=dev, dtype=torch.float32) / hd)

    def _rope(self, x, pos):  # x [B, S, h, hd], pos [S]
        half = x.shape[-1] // 2
        ang = pos[:, None].float() * self.inv[None]
        c, s = ang.cos()[None, :, None], ang.sin()[None, :, None]
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * c - b * s, a * s + b * c], -1)

    def _block(self, i, x, pos, attend):
        c, W, P = self.c, self.W, f"layers.{i}."
        B, S, _ = x.shape
        H, KVH, hd = c.n_heads, c.n_kv_heads, c.head_dim
        h = _rms(x, W[P + "attn_norm.weight"], c.norm_eps)
        q = self._rope((h @ W[P + "attn.wq"].T).view(B, S, H, hd), pos)
        k = self._rope((h @ W[P + "attn.wk"].T).view(B, S, KVH, hd), pos)
        v = (h @ W[P + "attn.wv"].T).view(B, S, KVH, hd)
        a = attend(i, q, k, v)
        x = x + a.reshape(B, S, H * hd) @ W[P + "attn.wo"].T
        g, u = (_rms(x, W[P + "mlp_norm.weight"], c.norm_eps) @ W[P + "mlp.w_gate_up"].T).chunk(2, -1)
        return x + (Fn.silu(g) * u) @ W[P + "mlp.w_down"].T

    def _head(self, x):
        W = self.W
        head = W["embed.weight"] if self.c.tie_embeddings else W["head.weight"]
        return _rms(x[:, -1], W["norm.weight"], self.c.norm_eps) @ head.T

    def forward(self, ids, start: int):
        """Logits of the last of S new tokens per sequence (ids [B, S]) at positions start..start+S-1."""
        S = ids.shape[1]
        G = self.c.n_heads // self.c.n_kv_heads
        pos = torch.arange(start, start + S, device=self.dev)
        mask = torch.arange(start + S, device=self.dev)[None, :] <= pos[:, None]

        def attend(i, q, k, v):
            self.k[i][:, start:start + S] = k
            self.v[i][:, start:start + S] = v
            K = self.k[i][:, :start + S].transpose(1, 2).repeat_interleave(G, 1)
            V = self.v[i][:, :start + S].transpose(1, 2).repeat_interleave(G, 1)
            return Fn.scaled_dot_product_attention(q.transpose(1, 2), K, V, attn_mask=mask).transpose(1, 2)
        x = self.W["embed.weight"][ids]
        for i in range(self.c.n_layers):
            x = self._block(i, x, pos, attend)
        return self._head(x)

    def step_static(self, ids, pos):
        """One token per sequence (ids [B, 1]) at position pos (a 0-d tensor), all shapes fixed (the whole
        cache, masked): what torch.compile's CUDA graphs can replay. Returns the greedy ids [B]."""
        G = self.c.n_heads // self.c.n_kv_heads
        p1 = pos.view(1)
        mask = (torch.arange(self.L, device=self.dev) <= pos)[None, :]

        def attend(i, q, k, v):
            self.k[i].index_copy_(1, p1, k)
            self.v[i].index_copy_(1, p1, v)
            K = self.k[i].transpose(1, 2).repeat_interleave(G, 1)
            V = self.v[i].transpose(1, 2).repeat_interleave(G, 1)
            return Fn.scaled_dot_product_attention(q.transpose(1, 2), K, V, attn_mask=mask).transpose(1, 2)
        x = self.W["embed.weight"][ids]
        for i in range(self.c.n_layers):
            x = self._block(i, x, p1, attend)
        return self._head(x).argmax(-1)


class TorchEvermind:
    """EvermindLM (RMSNorm, causal depthwise conv, shared-expert MoE dense over experts as evermind-vk
    computes it per-op, tied head). forward: the logits of each sequence's last token over ids [B, T], which
    also leaves each layer's conv window (the last conv_kernel - 1 conv inputs, zeros before the start); step:
    one new token of each sequence from the windows, which advance (the same computation as evermind-vk's
    recurrent decode step)."""

    def __init__(self, sd: dict, cfg, dev):
        self.c, self.dev = cfg, dev
        self.W = {k: torch.tensor(v, device=dev) for k, v in sd.items()}
        self.window = cfg.num_layers * (cfg.conv_kernel - 1) + 1
        self.win = None  # per layer [B, K - 1, d], oldest first

    def _moe(self, x, P):
        W, E, k = self.W, self.c.num_experts, self.c.top_k
        logits = x @ W[P + "wr"].T
        top, idx = torch.topk(logits, k, dim=-1)
        gates = torch.zeros_like(logits).scatter(-1, idx, torch.softmax(top, -1))

        def ffn(n):
            return torch.relu(x @ W[f"{P}{n}.w1"].T + W[f"{P}{n}.b1"]) @ W[f"{P}{n}.w2"].T + W[f"{P}{n}.b2"]
        out = ffn("shared")
        for e in range(E):
            out = out + gates[..., e:e + 1] * ffn(f"expert{e}")
        return out

    def forward(self, ids):
        c, W = self.c, self.W
        K1 = c.conv_kernel - 1
        x = W["emb"][ids]  # [B, T, d]
        self.win = []
        for i in range(c.num_layers):
            P = f"layer{i}."
            n = _rms(x, W[P + "nConv"], 1e-5)
            pad = Fn.pad(n.transpose(1, 2), (K1, 0))  # [B, d, K1 + T]
            self.win.append(pad[:, :, pad.shape[2] - K1:].transpose(1, 2).contiguous())
            conv = Fn.conv1d(pad, W[P + "conv"].flip(1)[:, None, :], groups=c.d_model).transpose(1, 2)
            a = x + conv
            x = a + self._moe(_rms(a, W[P + "nMoe"], 1e-5), P + "moe.")
        return x[:, -1] @ W["emb"].T

    def step(self, ids):
        """Logits [B, V] after one token per sequence (ids [B]); the windows advance."""
        c, W = self.c, self.W
        x = W["emb"][ids]  # [B, d]
        for i in range(c.num_layers):
            P = f"layer{i}."
            n = _rms(x, W[P + "nConv"], 1e-5)
            window = torch.cat([self.win[i], n[:, None]], 1)  # [B, K, d], oldest first
            self.win[i] = window[:, 1:]
            a = x + (window.flip(1) * W[P + "conv"].T[None]).sum(1)  # tap j reads t - j
            x = a + self._moe(_rms(a, W[P + "nMoe"], 1e-5), P + "moe.")
        return x @ W["emb"].T


class TorchMamba:
    """HybridMambaModel of mamba1 and attention layers decoding one token at a time: per mamba1 layer the conv
    window [B, K-1, D] and the scan state [B, D, N], per attention layer the keys and values so far
    [B, T, H, hd]; RMSNorm eps 1e-6, tied head. The prompt is fed token by token through the same step (as
    ours); reset() empties the states."""

    def __init__(self, sd: dict, cfg, dev, B: int):
        if any(k not in ("mamba1", "attention") for k in cfg.layers):
            raise ValueError("TorchMamba: mamba1 and attention layers only")
        self.c, self.dev, self.B = cfg, dev, B
        self.W = {k: torch.tensor(v, device=dev) for k, v in sd.items()}
        self.reset()

    def reset(self):
        c, B = self.c, self.B
        D, N, K = c.d_inner, c.dState, c.dConv
        self.win = [torch.zeros(B, K - 1, D, device=self.dev) for _ in c.layers]
        self.h = [torch.zeros(B, D, N, device=self.dev) for _ in c.layers]
        self.kv = [None for _ in c.layers]

    def _attention(self, i, x):
        c, W, P = self.c, self.W, f"layer{i}."
        d, H = c.dModel, c.nHeads
        qkv = _rms(x, W[P + "normWeight"], 1e-6) @ W[P + "wQKV"].T + W[P + "bQKV"]
        q, k, v = (qkv[:, j * d:(j + 1) * d].reshape(-1, 1, H, d // H) for j in range(3))
        if self.kv[i] is not None:
            k, v = torch.cat([self.kv[i][0], k], 1), torch.cat([self.kv[i][1], v], 1)
        self.kv[i] = (k, v)
        a = Fn.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return x + a.transpose(1, 2).reshape(-1, d) @ W[P + "wO"].T + W[P + "bO"]

    def step(self, ids):
        """Logits [B, V] after one token per sequence (ids [B]); the states advance in place."""
        c, W = self.c, self.W
        D, N, R = c.d_inner, c.dState, c.dt_rank
        x = W["embedding"][ids]
        for i, kind in enumerate(c.layers):
            if kind == "attention":
                x = self._attention(i, x)
                continue
            P = f"layer{i}."
            xz = _rms(x, W[P + "normWeight"], 1e-6) @ W[P + "wInProj"].T + W[P + "bInProj"]
            window = torch.cat([self.win[i], xz[:, None, :D]], 1)  # oldest first
            self.win[i] = window[:, 1:]
            u = Fn.silu((window.flip(1) * W[P + "wConv"].T[None]).sum(1) + W[P + "bConv"])  # tap j reads t - j
            xp = u @ W[P + "wXProj"].T + W[P + "bXProj"]
            dt = Fn.softplus(xp[:, :R] @ W[P + "wDtProj"].T + W[P + "bDtProj"])
            A = -torch.exp(W[P + "A_log"].clamp(-10, 5))
            dA = torch.exp(dt[..., None] * A)  # the input term: zero-order hold (dA - 1) / A, or Euler's dt
            b = torch.expm1(dt[..., None] * A) / A if c.discretization == "zoh" else dt[..., None]
            self.h[i] = dA * self.h[i] + (b * u[..., None]) * xp[:, None, R:R + N]
            y = (self.h[i] * xp[:, None, R + N:]).sum(-1) + W[P + "D_vec"] * u
            x = x + (y * Fn.silu(xz[:, D:])) @ W[P + "wOutProj"].T + W[P + "bOutProj"]
        return _rms(x, W["final_norm"], 1e-6) @ W["embedding"].T
