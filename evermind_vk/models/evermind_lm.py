"""builderforce's EvermindLM on the device: token embedding; per layer
    a = x + conv(RMSNorm(x; nConv)),   out = a + MoE(RMSNorm(a; nMoe))
(causal depthwise conv, tap j reads t - j; RMSNorm eps 1e-5; the MoE of evermind_vk.models.moe); tied
head logits = x emb^T (no final norm); loss = mean next-token cross-entropy over the T - 1 predicted
positions of each sequence.

Parameter names are builderforce's (`emb`, `layer{i}.conv` [d, K], `layer{i}.nConv`, `layer{i}.nMoe`,
`layer{i}.moe.wr`, `layer{i}.moe.shared.{w1,b1,w2,b2}`, `layer{i}.moe.expert{e}.{...}`) in
`state_dict()`, in builderforce's parameters() (EVL0) order. Init is builderforce's seeded init value for
value: emb N(0.02) from seed (seed >>> 0 || 1), conv identity (tap 0 = 1), gains 1, and MoE layer l from
seed + 1 + l.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..autodiff import Tape, functional as F
from ..errors import ShapeError
from ..runtime import Tensor, get_device, tensor, zeros
from .inputs import as_ids
from .moe import MoELayerParams, SeededRng, moe_init, stack_experts, unstack_experts
from .protocol import NextTokenModel, check_options, checkpointed_layers, config_from_dict
from .weights import check_state_dict
from .windows import conv_window_step, last_rows

DEFAULT_LM_SEED = 0x45564C4D  # "EVLM"
RMS_EPS = 1e-5


@dataclass(frozen=True)
class EvermindLMConfig:
    """An EvermindLM's vocabulary, width, layers, conv kernel, MoE hidden width, experts, top-k and init
    seed."""
    vocab_size: int
    d_model: int = 64
    num_layers: int = 2
    conv_kernel: int = 3
    hidden_dim: int | None = None  # None: 2 d_model
    num_experts: int = 4
    top_k: int = 2
    seed: int | None = None  # None: builderforce's default seed

    def __post_init__(self):
        if self.hidden_dim is None:
            object.__setattr__(self, "hidden_dim", 2 * self.d_model)
        if self.vocab_size <= 0:
            raise ValueError("EvermindLM: vocabSize must be > 0")
        if self.top_k > self.num_experts:
            raise ValueError("EvermindLM: topK must be ≤ numExperts")
        for n in ("d_model", "num_layers", "conv_kernel", "hidden_dim", "num_experts", "top_k"):
            if int(getattr(self, n)) < 1:
                raise ValueError(f"EvermindLMConfig.{n} must be >= 1, got {getattr(self, n)}")

    def to_dict(self) -> dict:
        """The fields by name (from_dict's input)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EvermindLMConfig":
        """The config from to_dict()'s output."""
        return config_from_dict(cls, d)

    def to_builderforce(self) -> dict:
        """builderforce's `config` (manifest order; no seed: builderforce's LM config drops it)."""
        return dict(vocabSize=self.vocab_size, dModel=self.d_model, numLayers=self.num_layers,
                    convKernel=self.conv_kernel, hiddenDim=self.hidden_dim, numExperts=self.num_experts,
                    topK=self.top_k)

    @classmethod
    def from_builderforce(cls, cfg: dict) -> "EvermindLMConfig":
        """The configuration from builderforce's camelCase config dict."""
        return cls(int(cfg["vocabSize"]), int(cfg["dModel"]), int(cfg["numLayers"]), int(cfg["convKernel"]),
                   int(cfg["hiddenDim"]), int(cfg["numExperts"]), int(cfg["topK"]),
                   None if cfg.get("seed") is None else int(cfg["seed"]))


def lm_init(c: EvermindLMConfig) -> dict[str, np.ndarray]:
    """builderforce's seeded initial EvermindLM parameters for config c, by name (host arrays)."""
    seed = ((DEFAULT_LM_SEED if c.seed is None else int(c.seed)) & 0xFFFFFFFF) or 1
    d, K = c.d_model, c.conv_kernel
    p = {"emb": SeededRng(seed).gauss(c.vocab_size * d, 0.02).reshape(c.vocab_size, d)}
    for i in range(c.num_layers):
        conv = np.zeros((d, K), np.float32)
        conv[:, 0] = 1
        p[f"layer{i}.conv"] = conv
        p[f"layer{i}.nConv"] = np.ones(d, np.float32)
        p[f"layer{i}.nMoe"] = np.ones(d, np.float32)
        for k, v in moe_init(d, c.hidden_dim, c.num_experts, seed + 1 + i).items():
            p[f"layer{i}.moe.{k}"] = v
    return p


class EvermindLM(NextTokenModel):
    """builderforce's EvermindLM (see the module docstring); implements models.protocol. Loss option
    `checkpoint`: recompute each layer in the backward (activation checkpointing, same gradients)."""

    loss_options = ("checkpoint",)

    def __init__(self, config: EvermindLMConfig | None = None, device=None, **kw):
        self.config = config or EvermindLMConfig(**kw)
        self.device = get_device(device)
        self._load(lm_init(self.config))

    def _load(self, named: dict) -> None:
        c, dev = self.config, self.device
        self.plain = {k: tensor(np.asarray(v, np.float32), device=dev) for k, v in named.items() if ".moe." not in k}
        self.moe = [MoELayerParams(named, c.num_experts, dev, prefix=f"layer{i}.moe.") for i in range(c.num_layers)]

    # -- parameters -----------------------------------------------------------------------------
    def parameters(self) -> dict[str, Tensor]:
        """The device tensors (MoE experts stacked: layer{i}.moe.{wr,w1,b1,w2,b2}), what an optimizer updates."""
        out = dict(self.plain)
        for i, m in enumerate(self.moe):
            out.update({f"layer{i}.moe.{k}": t for k, t in m.t.items()})
        return out

    def num_parameters(self) -> int:
        """Total number of parameter elements."""
        return sum(t.numel for t in self.parameters().values())

    def wsla_parameters(self) -> list[str]:
        """The narrow set WSLA (write-through adaptation) trains: each layer's conv taps and its two RMSNorm
        gains (3d + dK values a layer: how much of each channel's past and present a layer passes on), leaving
        the embedding, the routers and the experts frozen. builderforce defines no WSLA set for EvermindLM."""
        return [f"layer{i}.{k}" for i in range(self.config.num_layers) for k in ("conv", "nConv", "nMoe")]

    def _named(self, get) -> dict[str, np.ndarray]:
        c = self.config
        out = {"emb": get(self.plain["emb"])}
        for i, m in enumerate(self.moe):
            for k in ("conv", "nConv", "nMoe"):
                out[f"layer{i}.{k}"] = get(self.plain[f"layer{i}.{k}"])
            out.update(unstack_experts({k: get(t) for k, t in m.t.items()}, c.num_experts, prefix=f"layer{i}.moe."))
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        """builderforce's names and layouts, in its parameters() (EVL0) order."""
        return self._named(lambda t: t.numpy())

    def load_state_dict(self, sd: dict) -> None:
        # shapes from zero-stride stand-ins: no download of the model's own weights to learn them
        """Copy builderforce-named host arrays into the parameters (names and shapes checked first)."""
        shapes = {k: v.shape for k, v in self._named(lambda t: np.broadcast_to(np.float32(0), t.shape)).items()}
        check_state_dict(sd, shapes)
        for k, t in self.plain.items():
            t.copy_(np.asarray(sd[k]))
        for i, m in enumerate(self.moe):
            for k, v in stack_experts(sd, self.config.num_experts, prefix=f"layer{i}.moe.").items():
                m.t[k].copy_(v)

    def named_grads(self, grads) -> dict[str, np.ndarray]:
        """builderforce-named host gradients from a Tape's grads (zeros for parameters that got none)."""
        return self._named(lambda t: grads[t].numpy() if t in grads else np.zeros(t.shape, np.float32))

    # -- compute --------------------------------------------------------------------------------
    def _layer(self, i: int, seq_len, x, conv, n_conv, n_moe, wr, w1, b1, w2, b2) -> Tensor:
        n = F.rms_norm(x, n_conv, RMS_EPS)
        a = F.add(x, F.conv1d_causal(n, conv, seq_len=seq_len))
        m = F.rms_norm(a, n_moe, RMS_EPS)
        return F.add(a, F.moe_ffn(m, wr, w1, b1, w2, b2, self.config.top_k)[0])

    def forward(self, ids: Tensor, seq_len: int | None = None, checkpoint: bool | int = False) -> Tensor:
        """Logits [T, V] for token ids (u32 [T], or a list / numpy integer array: models/inputs.py):
        one sequence, or T / seq_len packed sequences of seq_len.
        checkpoint: keep only each checkpointed layer's input; the backward recomputes the layer (same
        gradients). True: every layer; an integer k: every k-th (models.protocol.checkpointed_layers)."""
        c, P = self.config, self.plain
        ids = as_ids(ids, c.vocab_size, self.device)
        T = ids.numel
        if T < 1:
            raise ShapeError("EvermindLM.forward needs at least one token")
        ckpt = checkpointed_layers(checkpoint, c.num_layers)
        x = F.embedding(ids, P["emb"])
        for i in range(c.num_layers):
            t = self.moe[i].t
            args = (x, P[f"layer{i}.conv"], P[f"layer{i}.nConv"], P[f"layer{i}.nMoe"],
                    t["wr"], t["w1"], t["b1"], t["w2"], t["b2"])
            fn = lambda *a, i=i: self._layer(i, seq_len, *a)  # noqa: E731
            x = F.checkpoint(fn, args) if ckpt[i] else fn(*args)
        return F.matmul(x, P["emb"], transpose_b=True)

    __call__ = forward

    # -- recurrent decoding (train/decode.py ConvDecoder) ------------------------------------------
    def init_state(self, batch: int = 1) -> list:
        """Per layer, the conv window of `batch` sequences after zero tokens, a fixed buffer updated in place
        by _step_ids: each sequence's last conv_kernel - 1 conv inputs (RMSNorm(x; nConv) rows, oldest first;
        zeros at the start: the causal padding), [batch * (conv_kernel - 1), d_model], sequence b's rows
        b * (conv_kernel - 1)..; None per layer when conv_kernel is 1 (no past to keep)."""
        c = self.config
        if batch < 1:
            raise ShapeError(f"init_state: batch {batch} < 1")
        K1 = c.conv_kernel - 1
        return [zeros((batch * K1, c.d_model), "f32", self.device) if K1 else None for _ in range(c.num_layers)]

    def _step_ids(self, ids: Tensor, state: list, first: int = 0, S: int = 1) -> Tensor:
        """Logits [n, V] of the last of S new tokens of each of n sequences (ids u32 [n*S], sequence-major)
        given their conv windows, slots first..first+n-1 of `state` (init_state), which advance in place: the
        forward's rows from each sequence's windows (models.windows.conv_window_step), S rows of work per
        sequence instead of its receptive field."""
        c, P = self.config, self.plain
        n = ids.numel // S
        if S < 1 or n * S != ids.numel:
            raise ShapeError(f"_step_ids: {ids.numel} ids are not whole sequences of {S}")
        x = F.embedding(ids, P["emb"])
        for i in range(c.num_layers):
            t = self.moe[i].t
            a = F.add(x, conv_window_step(state[i], F.rms_norm(x, P[f"layer{i}.nConv"], RMS_EPS),
                                          P[f"layer{i}.conv"], None, c.conv_kernel, first, S))
            m = F.rms_norm(a, P[f"layer{i}.nMoe"], RMS_EPS)
            x = F.add(a, F.moe_ffn(m, t["wr"], t["w1"], t["b1"], t["w2"], t["b2"], c.top_k)[0])
        return F.matmul(last_rows(x, S), P["emb"], transpose_b=True)

    def loss(self, ids: Tensor, targets: Tensor, seq_len: int | None = None, checkpoint: bool | int = False) -> Tensor:
        """Mean cross-entropy over targets < vocab (next_token_targets gives builderforce's T - 1 positions)."""
        return F.cross_entropy(self.forward(ids, seq_len, checkpoint), targets, overwrite_logits=True)

    def batch_loss(self, inputs: dict, batch: int, seq_len: int, dtype: str = "f32", grad_scale: float = 1.0,
                   **options) -> tuple:
        """(mean next-token cross-entropy of `batch` packed sequences of `seq_len` tokens, no extras)."""
        check_options(self, options)
        return self.loss(inputs["ids"], inputs["targets"], seq_len, checkpoint=options.get("checkpoint", False)), {}

    def next_token_targets(self, tokens, seq_len: int | None = None) -> np.ndarray:
        """u32 targets: tokens[t + 1] within each sequence, vocab_size (ignored) at each sequence's end."""
        tok = np.asarray(tokens, np.int64).ravel()
        L = tok.size if seq_len is None else int(seq_len)
        if L < 1 or tok.size % L:
            raise ShapeError(f"{tok.size} tokens are not whole sequences of {L}")
        t = np.full(tok.size, self.config.vocab_size, np.int64)
        seqs = tok.reshape(-1, L)
        t.reshape(-1, L)[:, :-1] = seqs[:, 1:]
        return t.astype(np.uint32)

    def check_tokens(self, tokens) -> np.ndarray:
        """tokens as a u32 array, each in [0, vocab_size) (ShapeError otherwise)."""
        tok = np.asarray(tokens, np.int64).ravel()
        if tok.size and (tok.min() < 0 or tok.max() >= self.config.vocab_size):
            raise ShapeError(f"token ids must be in 0..{self.config.vocab_size - 1}")
        return tok.astype(np.uint32)

    def loss_and_grads(self, tokens, checkpoint: bool = False):
        """builderforce's lossAndBackward (lossAndBackwardCheckpointed with checkpoint) on one sequence:
        (mean loss over T - 1 positions, named grads)."""
        tok = self.check_tokens(tokens)
        if tok.size < 2:
            raise ShapeError("a training sequence needs at least 2 tokens")
        ids = tensor(tok, device=self.device)
        tg = tensor(self.next_token_targets(tok), device=self.device)
        with Tape() as tape:
            loss = self.loss(ids, tg, checkpoint=checkpoint)
        grads = tape.backward(loss)
        return float(loss.numpy()[0]), self.named_grads(grads)

    def generate(self, prompt, max_new_tokens: int, temperature: float = 0.0, seed: int = 1,
                 stop_token: int | None = None, top_k: int = 0) -> list[int]:
        """builderforce's generate: greedy argmax (first maximum) unless temperature > 0, then its seeded
        sampler (SeededRng(seed), one draw per token, cumulative subtraction); an empty prompt starts from [0].
        top_k > 0 (ours; builderforce has none) samples among the k largest logits only."""
        tokens = [int(t) for t in self.check_tokens(prompt)]
        rng = SeededRng(seed) if temperature > 0 else None
        out: list[int] = []
        for _ in range(max_new_tokens):
            ids = tensor(np.asarray(tokens or [0], np.uint32), device=self.device)
            last = self.forward(ids).numpy()[-1]
            if rng is None:
                nxt = int(np.argmax(last))
            else:
                z = last.astype(np.float64) / temperature
                pr = np.exp(z - z.max()).astype(np.float32).astype(np.float64)
                if 0 < top_k < len(pr):
                    pr[np.argsort(-z, kind="stable")[top_k:]] = 0.0
                r = rng.uniforms(1)[0] * pr.sum()
                nxt = len(pr) - 1
                for i, v in enumerate(pr):
                    r -= v
                    if r <= 0:
                        nxt = i
                        break
            out.append(nxt)
            tokens.append(nxt)
            if stop_token is not None and nxt == stop_token:
                break
        return out
