"""A GGUF file's tokenizer: byte-level BPE (tokenizer.ggml.model "gpt2") built by `tokenizers` from the
file's vocabulary and merges, its control tokens kept whole as special tokens, and its chat template
rendered by jinja2 (sandboxed: the template is part of a hostile file)."""
from __future__ import annotations

from ..errors import FormatError, TokenError, UnsupportedError

try:  # the optional extra evermind-vk[pretrained]
    import jinja2.ext
    import jinja2.sandbox
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers
except ImportError:  # pragma: no cover
    tokenizers = None

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types


def _bytes_to_unicode() -> dict:
    """GPT-2's byte -> printable character map (the spelling of byte-level BPE vocabularies)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class GGUFTokenizer:
    """encode / decode / apply_chat_template, plus bos/eos ids, the stop ids of a chat turn, vocab_size."""

    def __init__(self, tokens: list, merges: list, token_types: list, meta: dict):
        if tokenizers is None:
            raise UnsupportedError("the GGUF tokenizer needs `tokenizers` and `jinja2`: "
                                   "pip install 'evermind-vk[pretrained]'")
        spell = _bytes_to_unicode()
        alphabet = set(spell.values())
        vocab = {}
        for i, t in enumerate(tokens):
            vocab[t if set(t) <= alphabet else "".join(spell[b] for b in t.encode("utf-8"))] = i
        if len(vocab) != len(tokens):
            raise FormatError("GGUF vocabulary has duplicate tokens")
        pairs = []
        for m in merges:
            parts = m.split(" ")
            if len(parts) != 2:
                raise FormatError(f"GGUF merge {m[:40]!r} is not two tokens")
            pairs.append(tuple(parts))
        try:
            bpe = models.BPE(vocab, pairs, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False)
        except Exception as e:  # tokenizers raises its own exception type for merges outside the vocabulary
            raise FormatError(f"GGUF merges do not fit the vocabulary: {e}") from e
        tk = tokenizers.Tokenizer(bpe)
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
        tk.decoder = decoders.ByteLevel()
        special = [t for t, ty in zip(tokens, token_types) if ty == CONTROL and set(t) <= alphabet]
        tk.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True) for t in special])
        user = [t for t, ty in zip(tokens, token_types) if ty == USER_DEFINED and t in vocab]
        if user:
            tk.add_tokens([tokenizers.AddedToken(t, normalized=False, special=False) for t in user])
        self._tk, self.tokens, self.vocab_size = tk, tokens, len(tokens)
        self.bos_id = meta.get("tokenizer.ggml.bos_token_id")
        self.eos_id = meta.get("tokenizer.ggml.eos_token_id")
        self.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False))
        self.chat_template = meta.get("tokenizer.chat_template")
        for k in ("bos_id", "eos_id"):
            v = getattr(self, k)
            if v is not None and not (isinstance(v, int) and 0 <= v < self.vocab_size):
                raise FormatError(f"GGUF {k} {v!r} outside the vocabulary")

    @classmethod
    def from_gguf(cls, f) -> "GGUFTokenizer":
        """From a parsed GGUF file (evermind_vk.io.gguf.GGUFFile)."""
        m = f.metadata
        kind = m.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise UnsupportedError(f"{f.path}: tokenizer {kind!r} (this loader builds byte-level BPE, 'gpt2')")
        tokens, merges = m.get("tokenizer.ggml.tokens"), m.get("tokenizer.ggml.merges")
        types = m.get("tokenizer.ggml.token_type") or [1] * len(tokens or ())
        if not isinstance(tokens, list) or not isinstance(merges, list) or len(types) != len(tokens) \
                or not all(isinstance(t, str) for t in tokens) or not all(isinstance(t, str) for t in merges):
            raise FormatError(f"{f.path}: tokenizer.ggml.tokens/merges/token_type missing or malformed")
        return cls(tokens, merges, list(types), m)

    def encode(self, text: str) -> list[int]:
        """Token ids of text; special tokens written in the text (<|im_start|>) stay whole."""
        if not isinstance(text, str):
            raise TokenError(f"encode takes a str, got {type(text).__name__}")
        ids = self._tk.encode(text, add_special_tokens=False).ids
        return ([self.bos_id] if self.add_bos and self.bos_id is not None else []) + ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Text of token ids (each checked against the vocabulary; special tokens kept unless skipped)."""
        ids = [int(i) for i in ids]
        if any(not 0 <= i < self.vocab_size for i in ids):
            raise TokenError(f"decode: token ids outside [0, {self.vocab_size})")
        return self._tk.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str):
        """The id of a token string, or None when the vocabulary lacks it."""
        return self._tk.token_to_id(token)

    def apply_chat_template(self, messages: list, add_generation_prompt: bool = True) -> str:
        """The file's chat template rendered over messages [{"role", "content"}] (a sandboxed jinja2)."""
        if not self.chat_template:
            raise UnsupportedError("this GGUF file has no chat template")
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                           extensions=[jinja2.ext.loopcontrols])

        def raise_exception(msg):
            raise TokenError(f"chat template: {msg}")
        env.globals["raise_exception"] = raise_exception
        try:
            tpl = env.from_string(self.chat_template)
            return tpl.render(messages=messages, add_generation_prompt=add_generation_prompt,
                              bos_token=self.tokens[self.bos_id] if self.bos_id is not None else "",
                              eos_token=self.tokens[self.eos_id] if self.eos_id is not None else "")
        except jinja2.TemplateError as e:
            raise FormatError(f"chat template: {e}") from e

    def stop_ids(self) -> list[int]:
        """Ids that end a turn: the end-of-sequence token and <|im_end|>/<|eot_id|>/<|endoftext|> if present."""
        out = [] if self.eos_id is None else [self.eos_id]
        for t in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<end_of_turn>"):
            i = self._tk.token_to_id(t)
            if i is not None and i not in out:
                out.append(i)
        return out
