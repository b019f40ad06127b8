"""Recorded decoding of every text model: a TransformerLM's (Decoder) prompt prefill as one recorded program per
length bucket and the decode step (one token of each of B sequences) as one recorded program, each replayed
with one submit; EvermindLM and HybridMambaModel (ConvDecoder, RecurrentDecoder: _StateDecoder) the same way
from their fixed-size states, their prefill one program per prompt length.
Everything that changes from one replay to the next (each sequence's position, cache slot and logits row,
the sampling parameters, the seed and step of the device sampler, the stop tokens) lives in a small u32
device buffer (`hyper`, ops/decode.py), uploaded with the token ids at the start of each replay; only the
chosen ids (and their stop flags) come back (ops.sample).

The KV caches are [slots, max_seq_len, KVH, head_dim] per layer: slot b holds sequence b of a batch.
A prefill runs the prompts of a batch together, each padded to the bucket P of the longest (the next power
of two >= its length, at least MIN_BUCKET, at most max_seq_len): one recorded program per (count, bucket).
Causal attention makes the padding invisible to the first n positions, and the cache rows it writes past n
are overwritten by the decode steps before any query reads them."""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .. import ops
from ..errors import ConfigError
from ..models.evermind_lm import RMS_EPS
from ..models.lora import lora_linear
from ..runtime import empty, record, zeros
from ..runtime.knobs import get as knob
from ..runtime.kernels import fill_words
from ..ops.decode import HEADER, ITEM, LAYER_WEIGHTS, MAX_STOPS, decode_step_plan, hyper_words
from ..runtime.select import decode as select_decode

MIN_BUCKET = 16
PREFILLS = 8  # prefill programs a state decoder keeps beyond one a slot (least recently used out)


def bucket(n: int, max_len: int) -> int:
    """The prefill length a prompt of n tokens is padded to."""
    p = MIN_BUCKET
    while p < n:
        p *= 2
    return min(p, max_len)


class _Sampling:
    """What every decoder shares: the device sampler's buffers (seen ids per slot, the picked ids) and the
    hyper words of the current generation."""

    def __init__(self, model, slots: int):
        dev = model.device
        self.model, self.slots = model, int(slots)
        self.seen = zeros((self.slots, model.config.vocab_size), "u32", dev, host_visible=True)
        self.picked = empty((2 * self.slots,), "u32", dev, host_visible=True)
        self.sampling = hyper_words([])  # header words of the current generation
        self.stops: list[int] = []
        self.prefill_tokens = 0  # prompt tokens the last step 0 ran
        self._chains: dict = {}  # k -> (program or None, ids, hyper, picked: a list of k each): _run_chain

    # -- per-generation state -------------------------------------------------------------------
    def start(self, sequences, temperature=0.0, top_k=None, top_p=None, repetition_penalty=1.0,
              stop_tokens=(), seed: int = 0) -> None:
        """Set the sampling parameters and mark each slot's tokens seen (for the repetition penalty)."""
        if len(stop_tokens) > MAX_STOPS:
            raise ConfigError(f"generate: at most {MAX_STOPS} stop tokens on the device, got {len(stop_tokens)}")
        self.stops = sorted(set(int(s) for s in stop_tokens))
        self.sampling = hyper_words([], temperature, top_k or 0, 1.0 if top_p is None else top_p,
                                    repetition_penalty, (), seed)
        if repetition_penalty != 1.0:
            marks = np.zeros((self.slots, self.model.config.vocab_size), np.uint32)
            for b, seq in enumerate(sequences):
                marks[b, np.asarray(seq, np.int64)] = 1
            self.seen.write_staging(marks)
            self.model.device.upload(self.seen)

    def _words(self, items, step: int) -> np.ndarray:
        w = hyper_words(items, stop_tokens=self.stops)
        w[:HEADER] = self.sampling[:HEADER]
        w[4], w[7] = len(self.stops), step & 0xFFFFFFFF
        return w

    @staticmethod
    def _ids_words(words, tokens) -> np.ndarray:
        """A program's hyper words with its n token ids after the words of n items and MAX_STOPS stops (where the
        fused steps read them: decode_layer's, mamba1_decode's, evermind_layer's)."""
        n = len(tokens)
        out = np.zeros(HEADER + ITEM * n + MAX_STOPS + n, np.uint32)
        out[:words.size] = words
        out[-n:] = tokens
        return out

    # -- several tokens a submit ------------------------------------------------------------------
    def chain_tokens(self, remaining: int, live) -> int:
        """Tokens a sequence the next decode replay chooses (_run_chain): the largest power of two within the
        chain length (select.decode.chain_tokens, EVERMIND_VK_DECODE_CHAIN) and `remaining`, that every live
        sequence's state holds (_chain_fits); 1: one token a replay (advance)."""
        k = select_decode.chain_floor(min(select_decode.chain_tokens(self.model.device.info.type,
                                                                     knob("EVERMIND_VK_DECODE_CHAIN")), int(remaining)))
        while k > 1 and not self._chain_fits(k, live):
            k //= 2
        return k

    def _chain_fits(self, k: int, live) -> bool:
        """Whether every live sequence can take k more tokens without a refill."""
        return True

    def _needs_ids(self, plan) -> bool:
        """Whether the decode step (`plan`: _step_plan's) reads its ids from the ids buffer (the per-op step)
        rather than from hyper's end (the fused steps)."""
        return plan.variant is None

    def chain_program(self, k: int):
        """The recorded decode replay of k tokens a sequence (_run_chain), or None before its first run."""
        entry = self._chains.get(k)
        return None if entry is None else entry[0]

    def _run_chain(self, k: int, tokens, positions, moves, marks, step: int) -> list:
        """k decode steps of every slot in one replay: step j feeds each slot b the id step j - 1 chose (step 0:
        tokens[b]) at positions[b] + j (positions[b] where not moves[b]), all recorded in one program: each
        step's hyper words uploaded at the start, each step's picks copied on the device into the next step's
        inputs (ops.copy_prefix), all picks read back at the end. The same kernels on the same inputs as k
        single steps (greedy output bit-identical; the device sampler draws from (seed, step + j)). Returns
        the k steps' picked arrays (ids, then stop flags)."""
        B, dev = self.slots, self.model.device
        entry = self._chains.get(k)
        if entry is None:
            n = HEADER + ITEM * B + MAX_STOPS + B
            entry = self._chains[k] = (
                None, [empty((B,), "u32", dev, host_visible=j == 0) for j in range(k)],
                [empty((n,), "u32", dev, host_visible=True) for _ in range(k)],
                [empty((2 * B,), "u32", dev, host_visible=True) for _ in range(k)])
        prog, ids, hyper, picked = entry
        ids[0].write_staging(np.asarray(tokens, np.uint32))
        for j in range(k):
            pos = [int(positions[b]) + (j if moves[b] else 0) for b in range(B)]
            words = self._ids_words(self._words([(pos[b], b, b, bool(marks[b])) for b in range(B)], step + j),
                                    tokens if j == 0 else [0] * B)
            hyper[j].write_staging(words)
        if prog is None:
            self._chains[k] = (self._record_chain(ids, hyper, picked),) + entry[1:]
        else:
            prog.run()
        return [p.read_staging() for p in picked]

    def _record_chain(self, ids, hyper, picked):
        """Record (and run) _run_chain's program over its buffers."""
        dev, B = self.model.device, self.slots
        plan = self._step_plan()
        needs_ids = self._needs_ids(plan)
        at = HEADER + ITEM * B + MAX_STOPS  # where the fused steps read the ids in hyper
        with record(dev) as prog:
            for h in hyper:
                dev.upload(h)
            if needs_ids:
                dev.upload(ids[0])
            for j in range(len(hyper)):
                if j:
                    ops.copy_prefix(picked[j - 1], hyper[j], B, at)
                    if needs_ids:
                        ops.copy_prefix(picked[j - 1], ids[j], B)
                self._body(ids[j], hyper[j], picked[j], plan)
            for p in picked:
                dev.sync_local(p)
        return prog

    def _replay(self, entry, ids: np.ndarray, words: np.ndarray, build) -> np.ndarray:
        prog, ids_t, hyper = entry[:3]
        ids_t.write_staging(ids)
        buf = np.zeros(hyper.numel, np.uint32)
        buf[:words.size] = words
        hyper.write_staging(buf)
        if prog is None:
            return build()  # records and runs the first time
        prog.run()
        return self.picked.read_staging()



class Decoder(_Sampling):
    """The recorded prefill and decode programs of one TransformerLM for `slots` sequences at once, with
    their caches. `decoder(model, slots)` keeps one per model and slot count (programs and buffers reused)."""

    def __init__(self, model, slots: int):
        super().__init__(model, slots)
        c, dev = model.config, model.device
        self.L = c.max_seq_len
        shape = (self.slots, self.L, c.n_kv_heads, c.head_dim)
        self.k = [zeros(shape, "f32", dev) for _ in range(c.n_layers)]
        self.v = [zeros(shape, "f32", dev) for _ in range(c.n_layers)]
        self._step = None  # (program or None, ids, hyper)
        self._scores = None  # attention_decode's scratch (_score)
        self._prefill: dict[tuple, tuple] = {}  # (sequences, bucket) -> (program or None, ids, hyper)
        self.cached: list[list[int]] = [[] for _ in range(self.slots)]  # the token of each cached position

    @property
    def length(self) -> list[int]:
        """Positions in each slot's cache."""
        return [len(c) for c in self.cached]

    # -- prefill --------------------------------------------------------------------------------
    def prefill(self, slots, ctxs, step: int) -> dict:
        """Run each ctxs[r] (<= max_seq_len token ids) into slots[r]'s cache rows 0..len-1, all in one
        replay (each padded to the bucket of the longest), and choose each one's next token:
        {slot: (id, is a stop token)}."""
        n, dev = len(slots), self.model.device
        P = bucket(max(len(c) for c in ctxs), self.L)
        entry = self._prefill.get((n, P))
        if entry is None:
            entry = self._prefill[(n, P)] = (None, empty((n * P,), "u32", dev, host_visible=True),
                                             empty((HEADER + ITEM * n + MAX_STOPS,), "u32", dev, host_visible=True))
        ids = np.zeros(n * P, np.uint32)
        for r, ctx in enumerate(ctxs):
            ids[r * P: r * P + len(ctx)] = ctx
        words = self._words([(0, b, r * P + len(ctx) - 1, 1) for r, (b, ctx) in enumerate(zip(slots, ctxs))], step)

        def build():
            self._prefill[(n, P)] = (self._record_prefill(n, P, entry[1], entry[2]),) + entry[1:]
            return self.picked.read_staging()
        picked = self._replay(entry, ids, words, build)
        return {b: (int(picked[b]), bool(picked[self.slots + b])) for b in slots}

    def _record_prefill(self, n: int, P: int, ids, hyper):
        m, dev = self.model, self.model.device
        c, Pm = m.config, m.params
        H, KVH, hd, T = c.n_heads, c.n_kv_heads, c.head_dim, n * P
        with record(dev) as prog:
            dev.upload(ids)
            dev.upload(hyper)
            x = m._embed(ids)
            h, _ = ops.rms_norm(x, Pm["layers.0.attn_norm.weight"], c.norm_eps)
            for i in range(c.n_layers):
                L = f"layers.{i}."
                q = ops.rope(lora_linear(m, h, L + "attn.wq").reshape(T, H, hd), 0, c.rope_theta, P)
                k = ops.rope(lora_linear(m, h, L + "attn.wk").reshape(T, KVH, hd), 0, c.rope_theta, P)
                v = lora_linear(m, h, L + "attn.wv").reshape(T, KVH, hd)
                ops.kv_write(k, self.k[i], hyper, P)
                ops.kv_write(v, self.v[i], hyper, P)
                a, _ = ops.attention(q, k, v, causal=True, save_probs=False, batch=n)
                x, h = self._mlp(x, a.reshape(T, H * hd), i)
            logits = m._head(h)
            ops.sample(logits, hyper, self.seen, self.picked, n)
            dev.sync_local(self.picked)
        return prog

    # -- one token of every slot ----------------------------------------------------------------
    def step(self, tokens, positions, active, step: int, marks=None) -> np.ndarray:
        """Feed tokens[b] at positions[b] of slot b (its cache holds positions 0..positions[b]-1) and
        choose each slot's next token; active[b] False: slot b's result is ignored and nothing of its
        state that a later prefill does not rewrite changes. marks[b] (default active[b]): the chosen id is
        marked seen (the repetition penalty). Returns picked: ids, then stop flags."""
        B, dev = self.slots, self.model.device
        if self._step is None:  # hyper: the step's words, then (the fused step's ids) the tokens
            self._step = _entry(dev, B)
        marks = active if marks is None else marks
        words = self._ids_words(self._words([(int(positions[b]) if active[b] else 0, b, b,
                                              bool(active[b] and marks[b])) for b in range(B)], step), tokens)

        def build():
            self._step = (self._record_step(*self._step[1:]),) + self._step[1:]
            return self.picked.read_staging()
        return self._replay(self._step, np.asarray(tokens, np.uint32), words, build)

    def _chain_fits(self, k: int, live) -> bool:
        """k more positions in every live sequence's cache (past max_seq_len a refill runs: one token a step)."""
        return all(not live[b] or len(self.cached[b]) + k <= self.L for b in range(self.slots))

    def step_launch(self) -> select_decode.Launch:
        """What the decode step's path rule (ops.decode_step_plan) needs to know of the model."""
        m, c = self.model, self.model.config
        return select_decode.Launch(c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff, self.L,
                                    adapters=bool(getattr(m, "lora", None)) and not getattr(m, "lora_merged", False),
                                    quantized=bool(getattr(m, "qweights", None)), vocab=c.vocab_size,
                                    items=self.slots)

    def _step_plan(self):
        """The decode step's path (ops.decode_step_plan: plan.variant None runs the per-op step)."""
        return decode_step_plan(self.step_launch(), self.model.device)

    def _record_step(self, ids, hyper):
        plan, dev = self._step_plan(), self.model.device
        with record(dev) as prog:
            if self._needs_ids(plan):
                dev.upload(ids)
            dev.upload(hyper)  # the fused step's ids ride at its end (step): one upload
            self._body(ids, hyper, self.picked, plan)
            dev.sync_local(self.picked)
        return prog

    def _body(self, ids, hyper, picked, plan) -> None:
        """One decode step of every slot, recorded into the current program (its inputs already on the device):
        the fused step where `plan` says so, else the per-op step, then the sampler into picked."""
        if plan.variant is not None:
            logits = self._fused_logits(hyper, plan.head)
        else:
            m, dev = self.model, self.model.device
            c, B = m.config, self.slots
            H, KVH, hd = c.n_heads, c.n_kv_heads, c.head_dim
            x = m._embed(ids)
            h, _ = ops.rms_norm(x, m.params["layers.0.attn_norm.weight"], c.norm_eps)
            for i in range(c.n_layers):
                L = f"layers.{i}."
                q = ops.rope_kv_at(lora_linear(m, h, L + "attn.wq").reshape(B, H, hd),
                                   lora_linear(m, h, L + "attn.wk").reshape(B, KVH, hd),
                                   lora_linear(m, h, L + "attn.wv").reshape(B, KVH, hd),
                                   hyper, self.k[i], self.v[i], 1, c.rope_theta)
                a = ops.attention_decode(q, self.k[i], self.v[i], hyper, self._score())
                x, h = self._mlp(x, a.reshape(B, H * hd), i)
            logits = m._head(h)
        ops.sample(logits, hyper, self.seen, picked, self.slots)

    def _score(self):
        """attention_decode's scores scratch (the per-op step's), made at first use."""
        if self._scores is None:
            self._scores = empty((self.slots * self.model.config.n_heads * self.L,), "f32", self.model.device)
        return self._scores

    def _fused_logits(self, hyper, head: bool):
        """The decode step on decode_layer: one dispatch a block (layer 0 also looks up the embedding rows,
        each block ends with the next block's attention norm or the final norm, the last with the head's logits
        where `head`, else the head's product follows): the logits."""
        m, dev = self.model, self.model.device
        c, B, Pm = m.config, self.slots, m.params
        x = empty((B, c.d_model), "f32", dev)  # the residual stream (layer 0 writes it)
        h = empty((B, c.d_model), "f32", dev)
        W = Pm["embed.weight"] if c.tie_embeddings else Pm["head.weight"]
        logits = empty((B, c.vocab_size), "f32", dev) if head else None
        for i in range(c.n_layers):
            L, last = f"layers.{i}.", i + 1 == c.n_layers
            nxt = "norm.weight" if last else f"layers.{i + 1}.attn_norm.weight"
            ops.decode_layer(x, hyper, self.k[i], self.v[i], [Pm[L + n] for n in LAYER_WEIGHTS], Pm[nxt],
                             eps=c.norm_eps, theta=c.rope_theta, limit=c.swiglu_limit,
                             ids=hyper if i == 0 else None, table=Pm["embed.weight"] if i == 0 else None,
                             out=h, head=W if head and last else None, logits=logits if last else None,
                             ids_offset=HEADER + ITEM * B + MAX_STOPS)
        return logits if head else m._head(h)

    def step_program(self):
        """The recorded decode step (one submit for the whole batch), or None before the first step."""
        return None if self._step is None else self._step[0]

    # -- one generation step -------------------------------------------------------------------
    def advance(self, seqs, live, step: int, keep: bool = False) -> dict:
        """Choose the next token of each live sequence (seqs: each one's ids so far): {b: (id, is stop)}.
        Step 0 runs the prompts' prefills (keep, one slot: only the prompt's tokens past the positions its
        cache already holds, see _continue); later steps one decode replay for all, and a prefill of the
        last max_seq_len tokens for each sequence whose cache is full."""
        B, L, res = self.slots, self.L, {}
        if step == 0:
            kept = self._kept(seqs[0]) if keep and B == 1 else 0
            if kept:
                return self._continue(seqs[0], kept)
            self.cached = [list(q[-L:]) for q in seqs]
            self.prefill_tokens = sum(self.length)
            return self.prefill(list(range(B)), [q[-L:] for q in seqs], 0)
        length = self.length
        refill = [live[b] and length[b] + 1 > L for b in range(B)]
        feed = [live[b] and not refill[b] for b in range(B)]
        if any(feed):
            pk = self.step([seqs[b][-1] if feed[b] else 0 for b in range(B)], length, feed, step)
            for b in range(B):
                if feed[b]:
                    res[b] = (int(pk[b]), bool(pk[B + b]))
                    self.cached[b].append(int(seqs[b][-1]))
        if any(refill):
            for b in range(B):
                if refill[b]:
                    self.cached[b] = list(seqs[b][-L:])
            res.update(self.prefill([b for b in range(B) if refill[b]], [seqs[b][-L:] for b in range(B) if refill[b]],
                                    step))
        return res

    def advance_chain(self, seqs, live, step: int, k: int) -> list:
        """Steps step..step+k-1 of every live sequence in one replay (k from chain_tokens: every live cache
        holds k more positions): a list of k {b: (id, is stop)}, each sequence's ending at its first stop."""
        B = self.slots
        pks = self._run_chain(k, [seqs[b][-1] if live[b] else 0 for b in range(B)],
                              [len(self.cached[b]) if live[b] else 0 for b in range(B)], live, live, step)
        out = _chain_results(pks, live, B)
        for b in range(B):
            if live[b]:  # the tokens each step fed: the last one, then each pick before the first stop
                fed = [seqs[b][-1]] + [out[j][b][0] for j in range(k - 1) if b in out[j + 1]]
                self.cached[b].extend(int(t) for t in fed)
        return out

    def _kept(self, prompt) -> int:
        """Positions of slot 0's cache that begin `prompt` (at most all but its last token; 0 where the
        prompt does not fit the cache)."""
        if len(prompt) > self.L:
            return 0
        n = 0
        for a, b in zip(self.cached[0], prompt[:-1]):
            if a != b:
                break
            n += 1
        return n

    def _continue(self, prompt, n: int) -> dict:
        """Keep slot 0's first n cached positions (they begin the prompt, _kept) and feed the rest of the
        prompt through the decode step, one token a replay (each position's keys and values depend on the
        tokens up to it only: the same numbers as a prefill of the whole prompt); the last token's pick is
        the next token."""
        self.cached = [list(prompt[:n])]
        self.prefill_tokens = len(prompt) - n
        for j in range(n, len(prompt)):
            last = j == len(prompt) - 1
            pk = self.step([prompt[j]], [j], [True], 0, marks=[last])
            self.cached[0].append(int(prompt[j]))
        return {0: (int(pk[0]), bool(pk[1]))}

    # -- shared pieces --------------------------------------------------------------------------
    def _mlp(self, x, a, i: int):
        """The rest of block i after attention: output projection, residual, norm, SwiGLU, residual, and the
        norm that follows (the next block's attention norm, or the final norm): (x, that norm of x). Each
        residual add and the norm after it run as one kernel (ops.add_rms_norm: the same bits as both)."""
        m, c, L = self.model, self.model.config, f"layers.{i}."
        x, h, _ = ops.add_rms_norm(x, lora_linear(m, a, L + "attn.wo"), m.params[L + "mlp_norm.weight"], c.norm_eps)
        g = ops.glu(lora_linear(m, h, L + "mlp.w_gate_up"), "silu", c.swiglu_limit)
        nxt = f"layers.{i + 1}.attn_norm.weight" if i + 1 < c.n_layers else "norm.weight"
        x, h, _ = ops.add_rms_norm(x, lora_linear(m, g, L + "mlp.w_down"), m.params[nxt], c.norm_eps)
        return x, h


class _StateDecoder(_Sampling, ABC):
    """The decoders of models whose past is a fixed-size state per sequence (EvermindLM's conv windows,
    HybridMambaModel's conv windows, scan states and attention caches; model.init_state(slots), slot b: row b of
    every state buffer, updated in place), never re-running the context. Two kinds of recorded program: the
    prefill, which runs prompts of S tokens through every layer from the reset states (the per-op step with S
    rows a sequence: convs over window + S rows, scans in chunks), all slots in one program where the prompts
    are of one length, else one program a slot (kept per (first slot, slots, S), the last PREFILLS + slots:
    padding would enter the state, so prompt lengths are not bucketed); and the decode step, which feeds one
    token of every slot and samples all of them (one submit for the batch; a stopped slot is fed a dummy token,
    its results ignored). The decode step runs on the model's fused kernel (one dispatch a block, the ids at
    the end of the hyper words) where the path rule (_plan) says so, else on the per-op step (_step_logits).
    Each slot's position (tokens fed since the reset) travels in the hyper words."""

    def __init__(self, model, slots: int):
        super().__init__(model, slots)
        self.state = model.init_state(self.slots)
        self.pos = np.zeros(self.slots, np.int64)  # tokens fed to each slot since the reset
        self._step = _entry(model.device, self.slots)  # every slot's token at once
        self._prefills: dict = {}  # (first, n, S) -> (program or None, ids [n * S], hyper): prompts of S tokens
        self._zero = None  # the recorded reset of the states

    # -- what a model kind provides ------------------------------------------------------------------
    @abstractmethod
    def _state_tensors(self) -> list:
        """The state buffers a reset zeroes."""

    @abstractmethod
    def _plan(self, n: int):
        """The decode step's path for n sequences (plan.variant None: per-op)."""

    @abstractmethod
    def _fused_logits(self, hyper, ids, first: int, n: int, plan):
        """Logits [n, V] of one token of slots first.. on the fused kernel as `plan` (the path rule's) says (ids at
        hyper's end; `ids`, the same ids alone, not uploaded: for a per-op layer that needs them)."""

    @abstractmethod
    def _step_logits(self, ids, first: int, hyper, S: int):
        """Logits [n, V] of the last of S tokens of slots first.. on the per-op step."""

    def _prompt(self, q) -> list:
        """The part of a prompt the state needs (all of it)."""
        return list(q)

    def _fit(self, need: int) -> None:
        """A state that holds `need` positions (fixed-size states always do)."""

    # -- shared ------------------------------------------------------------------------------------
    def _reset(self) -> None:
        """The states after zero tokens: one submit zeroes every state buffer."""
        self.pos[:] = 0
        if self._zero is not None:
            self._zero.run()
            return
        with record(self.model.device) as self._zero:  # runs on leaving
            for t in self._state_tensors():
                fill_words(t, 0)

    def _feed_all(self, tokens, marks, step: int) -> np.ndarray:
        """Feed tokens[b] to every slot b in one replay of the decode step; picked: ids, then stop flags."""
        self._fit(int(self.pos.max()) + 1)
        words = self._ids_words(self._words([(int(self.pos[b]), b, b, bool(marks[b])) for b in range(self.slots)],
                                            step), tokens)

        def build():
            self._step = (self._record(self._step, 0, self.slots),) + self._step[1:]
            return self.picked.read_staging()
        pk = self._replay(self._step, np.asarray(tokens, np.uint32), words, build)
        self.pos += 1
        return pk

    def step_program(self):
        """The recorded decode step (one token of every slot, one submit for the batch), or None before the
        first step."""
        return self._step[0]

    def _record(self, entry, first: int, n: int, S: int = 1):
        """Record (and run) a step of slots first..first+n-1 with entry's ids and hyper: the fused step where the
        path rule says so, else the per-op step; S > 1 tokens a slot: a prefill from the reset states (per-op)."""
        dev, (_, ids, hyper) = self.model.device, entry
        plan = self._plan(n) if S == 1 else None
        with record(dev) as prog:
            if plan is None or self._needs_ids(plan):
                dev.upload(ids)
            dev.upload(hyper)  # the fused step's ids ride at its end
            self._body(ids, hyper, self.picked, plan, first, n, S)
            dev.sync_local(self.picked)
        return prog

    def _step_plan(self):
        return self._plan(self.slots)

    def _body(self, ids, hyper, picked, plan, first: int = 0, n: int | None = None, S: int = 1) -> None:
        """A step of slots first..first+n-1 (default all), recorded into the current program (its inputs on the
        device): the fused step where `plan` says so (plan None: S tokens a slot, per-op), then the sampler."""
        n = self.slots if n is None else n
        if plan is not None and plan.variant is not None:
            logits = self._fused_logits(hyper, ids, first, n, plan)
        else:
            logits = self._step_logits(ids, first, hyper, S)
        ops.sample(logits, hyper, self.seen, picked, n)

    def _prefill_run(self, first: int, n: int, S: int, ids: np.ndarray) -> np.ndarray:
        """Feed S prompt tokens to each of slots first..first+n-1 (from their reset states) in one replay of
        the prefill program for (first, n, S); picked: ids, then stop flags."""
        key = (first, n, S)
        self._fit(S)
        entry = self._prefills.pop(key, None) or _entry(self.model.device, n, n * S)
        while len(self._prefills) >= PREFILLS + self.slots:  # the least recently used goes
            del self._prefills[next(iter(self._prefills))]
        self._prefills[key] = entry
        words = self._words([(0, first + r, r, True) for r in range(n)], 0)
        if S == 1:  # a one-token prompt runs the decode step's path (_record): the fused one reads ids from hyper
            words = self._ids_words(words, ids)

        def build():
            self._prefills[key] = (self._record(entry, first, n, S),) + entry[1:]
            return self.picked.read_staging()
        pk = self._replay(self._prefills[key], ids, words, build)
        self.pos[first:first + n] = S
        return pk

    def _prefill(self, seqs) -> dict:
        """Reset the states and feed the prompts (_prompt of each), each from its slot's reset state: prompts of
        one length in one prefill program for all slots, else one per slot; each slot's next token
        {b: (id, is stop)}."""
        self._reset()
        B = self.slots
        seqs = [self._prompt(q) for q in seqs]
        if len({len(q) for q in seqs}) == 1:
            pk = self._prefill_run(0, B, len(seqs[0]), np.concatenate([np.asarray(q, np.uint32) for q in seqs]))
            res = {b: (int(pk[b]), bool(pk[B + b])) for b in range(B)}
        else:
            res = {}
            for b, q in enumerate(seqs):
                pk = self._prefill_run(b, 1, len(q), np.asarray(q, np.uint32))
                res[b] = (int(pk[b]), bool(pk[B + b]))
        self.prefill_tokens = sum(len(q) for q in seqs)
        return res

    def advance_chain(self, seqs, live, step: int, k: int) -> list:
        """Steps step..step+k-1 of every slot in one replay (_run_chain; a stopped slot is fed dummy tokens, its
        results ignored): a list of k {b: (id, is stop)} of the live slots, each ending at its first stop."""
        self._fit(int(self.pos.max()) + k)
        pks = self._run_chain(k, [seqs[b][-1] if live[b] else 0 for b in range(self.slots)], self.pos,
                              [True] * self.slots, live, step)
        self.pos += k
        return _chain_results(pks, live, self.slots)

    def advance(self, seqs, live, step: int) -> dict:
        """The next token of each live sequence, {b: (id, is stop)}: step 0 feeds the prompts (states reset
        first), later steps each live sequence's last token (one replay for all slots)."""
        if step == 0:
            return self._prefill(seqs)
        pk = self._feed_all([seqs[b][-1] if live[b] else 0 for b in range(self.slots)], live, step)
        return {b: (int(pk[b]), bool(pk[self.slots + b])) for b in range(self.slots) if live[b]}


def _chain_results(pks, live, B: int) -> list:
    """The k replies of a chained replay as k {b: (id, is stop)} of the live slots, each slot's ending at its
    first stop (the steps after it fed a stop token: their picks are dropped)."""
    out, going = [], [bool(x) for x in live]
    for pk in pks:
        res = {b: (int(pk[b]), bool(pk[B + b])) for b in range(B) if going[b]}
        for b, (_, stop) in res.items():
            going[b] = not stop
        out.append(res)
    return out


class RecurrentDecoder(_StateDecoder):
    """HybridMambaModel (_StateDecoder): conv windows and scan states, and attention layers' key and value
    caches, which read each slot's position from the hyper buffer; the caches start at ATTENTION_CACHE_MIN
    positions and double (every program recorded again) when a sequence outgrows them. The fused step:
    ops.mamba1_decode and ops.hybrid_attn_decode, one dispatch a mamba1 or attention layer (the path rule decides
    each kind for the caches' current capacity), a mixed stack's other layers per-op beside them
    (HybridMambaModel._fused_step_ids, runtime.select.decode.plan, EVERMIND_VK_DECODE_FUSED)."""

    def _state_tensors(self) -> list:
        # attention reads only the positions it wrote: its caches need no zeroing
        return [t for layer in self.state for key, t in layer.items() if t is not None and key in ("conv", "h")]

    def _plan(self, n: int):
        return decode_step_plan(self.model.decode_launch(n, self.model.state_capacity(self.state)), self.model.device)

    def _needs_ids(self, plan) -> bool:
        # a per-op first layer looks the embedding up from the ids buffer
        return plan.variant is None or self.model.config.layers[0] not in plan.layers

    def _fused_logits(self, hyper, ids, first: int, n: int, plan):
        return self.model._fused_step_ids(hyper, self.state, n, first, HEADER + ITEM * n + MAX_STOPS, plan.head,
                                          hyper=hyper, tokens=ids, fused=plan.layers)

    def _step_logits(self, ids, first: int, hyper, S: int):
        return self.model._step_ids(ids, self.state, first, hyper, S, start=S > 1)

    def _fit(self, need: int) -> None:
        """Attention caches that hold `need` positions: grown (doubled at least) when short, every program
        recorded again over the new buffers."""
        if not self.model.fit_state(self.state, need):
            return
        self._step = (None,) + self._step[1:]
        self._prefills = {k: (None,) + e[1:] for k, e in self._prefills.items()}
        self._chains = {}
        self._zero = None


class ConvDecoder(_StateDecoder):
    """EvermindLM (_StateDecoder): each layer's causal conv is its only memory of the past, so a sequence's
    state is, per layer, its last conv_kernel - 1 conv inputs (EvermindLM.init_state), and a prompt is fed from
    its last W = num_layers (conv_kernel - 1) + 1 tokens (the receptive field: the windows after it, and its
    last token's logits, are those of the whole prompt). The fused step: ops.evermind_layer, one dispatch a
    block (runtime.select.decode.plan with a ConvLaunch, EVERMIND_VK_DECODE_FUSED)."""

    def __init__(self, model, slots: int):
        super().__init__(model, slots)
        c = model.config
        self.W = c.num_layers * (c.conv_kernel - 1) + 1

    def step_launch(self, items: int) -> select_decode.ConvLaunch:
        """What the step's path rule (ops.decode_step_plan) needs to know of the model."""
        c = self.model.config
        return select_decode.ConvLaunch(c.d_model, c.hidden_dim, c.num_experts, c.top_k, c.conv_kernel,
                                        c.vocab_size, items)

    def _state_tensors(self) -> list:
        return [t for t in self.state if t is not None]

    def _plan(self, n: int):
        return decode_step_plan(self.step_launch(n), self.model.device)

    def _prompt(self, q) -> list:
        return list(q[-self.W:])

    def _step_logits(self, ids, first: int, hyper, S: int):
        return self.model._step_ids(ids, self.state, first, S)

    def _fused_logits(self, hyper, ids, first: int, n: int, plan):
        """One evermind_layer dispatch a block (each item's window slot from hyper; layer 0 also looks up the
        embedding rows, the last also computes the tied head's logits where plan.head, else the head's product
        follows)."""
        m, dev, head = self.model, self.model.device, plan.head
        c, P = m.config, m.plain
        x = empty((n, c.d_model), "f32", dev)  # the residual stream (layer 0 writes it)
        logits = empty((n, c.vocab_size), "f32", dev) if head else None
        for i in range(c.num_layers):
            last = i + 1 == c.num_layers
            t = m.moe[i].t
            ops.evermind_layer(x, hyper, self.state[i], P[f"layer{i}.conv"], P[f"layer{i}.nConv"],
                               P[f"layer{i}.nMoe"], [t[k] for k in ("wr", "w1", "b1", "w2", "b2")],
                               top_k=c.top_k, eps=RMS_EPS, table=P["emb"] if i == 0 else None,
                               ids_offset=HEADER + ITEM * n + MAX_STOPS,
                               head=P["emb"] if head and last else None, logits=logits if last else None)
        return logits if head else ops.matmul(x, P["emb"], transpose_b=True)


def _entry(dev, items: int, ids: int | None = None) -> tuple:
    """A program slot of `items` sequences: (program or None until recorded, ids u32 [ids, default items],
    hyper words and, after them, room for the ids again: _Sampling._ids_words)."""
    return (None, empty((items if ids is None else ids,), "u32", dev, host_visible=True),
            empty((HEADER + ITEM * items + MAX_STOPS + items,), "u32", dev, host_visible=True))


KINDS = {"TransformerLM": Decoder, "LlamaLM": Decoder, "EvermindLM": ConvDecoder, "HybridMambaModel": RecurrentDecoder}


def decoder(model, slots: int) -> Decoder:
    """The model's Decoder for `slots` sequences (built once, then reused)."""
    # programs bind the parameters' buffers: a new parameter tensor or adapter records new programs
    key = (int(slots), tuple((k, t.uid) for k, t in model.parameters().items()),
           tuple(sorted((getattr(model, "lora", None) or {}).items())), bool(getattr(model, "lora_merged", False)))
    cache = model.__dict__.setdefault("_decoders", {})
    d = cache.get(key)
    if d is None:
        for k in [k for k in cache if k[0] == key[0]]:  # one decoder per slot count
            del cache[k]
        d = cache[key] = KINDS[type(model).__name__](model, slots)
    return d


def keeps_prefix(model) -> bool:
    """Whether the model's decoder continues a cached prefix (generate's keep_prefix): the KV-cache Decoder."""
    return KINDS.get(type(model).__name__) is Decoder


def supports(model) -> bool:
    """Whether `model` decodes through this module (TransformerLM and LlamaLM, EvermindLM, HybridMambaModel)."""
    return type(model).__name__ in KINDS
