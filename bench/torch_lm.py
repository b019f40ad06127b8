"""The PyTorch twin of evermind-vk's TransformerLM, for the benchmarks (bench/train_bench.py,
bench/iree_bench.py). It imports torch only (never evermind_vk), so that another virtualenv (the IREE
benchmark's) can load it from this file."""


def torch_model(cfg, dev, best: bool = False):
    """The PyTorch twin of evermind-vk's TransformerLM (tied head, RMSNorm, half-split RoPE, GQA,
    row-split SwiGLU). `cfg`: an LMConfig or any object with its fields and `head_dim`. best=True: the same
    function written as a PyTorch user tuning for speed would (torch's fused RMSNorm, SDPA's native GQA instead
    of repeating K/V, RoPE tables computed once), where the running torch has them."""
    import torch
    nn = torch.nn
    H, KVH, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim

    class RMS(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Parameter(torch.ones(d))

        def forward(self, x):
            if fused_norm:
                return torch.nn.functional.rms_norm(x, (x.shape[-1],), self.w, cfg.norm_eps)
            return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + cfg.norm_eps) * self.w

    fused_norm = best and hasattr(torch.nn.functional, "rms_norm")
    native_gqa = best and "enable_gqa" in (torch.nn.functional.scaled_dot_product_attention.__doc__ or "")
    tables = {}

    def rope(x, S):  # x [B, S, h, hd], half-split
        half = hd // 2
        key = (S, x.device, x.dtype)
        if not best or key not in tables:
            freq = cfg.rope_theta ** (-2 * torch.arange(half, device=x.device) / hd)
            ang = torch.arange(S, device=x.device)[:, None] * freq[None]
            tables[key] = ang.cos()[None, :, None], ang.sin()[None, :, None]
        c, s = tables[key]
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * c - b * s, a * s + b * c], -1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.d_model
            self.n1, self.n2 = RMS(d), RMS(d)
            self.wq = nn.Linear(d, H * hd, bias=False)
            self.wk = nn.Linear(d, KVH * hd, bias=False)
            self.wv = nn.Linear(d, KVH * hd, bias=False)
            self.wo = nn.Linear(H * hd, d, bias=False)
            self.gu = nn.Linear(d, 2 * cfg.d_ff, bias=False)
            self.down = nn.Linear(cfg.d_ff, d, bias=False)

        def forward(self, x):
            B, S, _ = x.shape
            h = self.n1(x)
            q = rope(self.wq(h).view(B, S, H, hd), S).transpose(1, 2)
            k = rope(self.wk(h).view(B, S, KVH, hd), S).transpose(1, 2)
            v = self.wv(h).view(B, S, KVH, hd).transpose(1, 2)
            if native_gqa:
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                k, v = k.repeat_interleave(H // KVH, 1), v.repeat_interleave(H // KVH, 1)
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.wo(a.transpose(1, 2).reshape(B, S, H * hd))
            g, u = self.gu(self.n2(x)).chunk(2, -1)
            return x + self.down(torch.nn.functional.silu(g) * u)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.n_layers))
            self.norm = RMS(cfg.d_model)

        def forward(self, ids):
            x = self.emb(ids)
            for b in self.blocks:
                x = b(x)
            return self.norm(x) @ self.emb.weight.T

    lm = LM()
    with torch.no_grad():  # evermind-vk's init: N(0, 0.02) matrices and embedding, unit norm gains
        for p in lm.parameters():
            if p.ndim == 2:
                p.normal_(0.0, 0.02)
    return lm.to(dev)
