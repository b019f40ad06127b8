"""SmolLM2-135M from its GGUF file gives the numbers of the reference implementation: Hugging Face
transformers loading the same file (dequantized, f32, CPU). Logits of a fixed prompt, a greedy continuation
of 32 tokens, and the tokenizer on 1,000 strings with Unicode and whitespace edge cases."""
import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.train.generate import generate

PROMPT = "The capital of France is"


def test_logits_match_transformers(smollm2, reference):
    import torch
    model, tok = smollm2
    ref_model, ref_tok = reference
    ids = tok.encode(PROMPT)
    assert ids == ref_tok.encode(PROMPT)
    ours = model.forward(ev.tensor(np.array(ids, np.uint32))).numpy()
    with torch.no_grad():
        want = ref_model(torch.tensor([ids])).logits[0].numpy()
    assert ours.shape == want.shape
    err = np.abs(ours - want).max()
    assert err <= 1e-3 * np.abs(want).max(), f"max |logit error| {err} against max |logit| {np.abs(want).max()}"
    # the KV-cache path (prefill, then one token) gives the same last row
    cache = model.kv_cache(64)
    last = cache.step(ids[:-1]) is not None and cache.step(ids[-1:])
    assert np.abs(last - want[-1]).max() <= 1e-3 * np.abs(want).max()


def test_greedy_32_tokens_match_transformers(smollm2, reference):
    import torch
    model, tok = smollm2
    ref_model, _ = reference
    ids = tok.encode(PROMPT)
    want, past, x = [], None, torch.tensor([ids])
    with torch.no_grad():  # transformers' greedy decoding, step by step (no end-of-text handling either side)
        for _ in range(32):
            out = ref_model(x, past_key_values=past, use_cache=True)
            past = out.past_key_values
            want.append(int(out.logits[0, -1].argmax()))
            x = torch.tensor([[want[-1]]])
    got = generate(model, ids, max_new_tokens=32)
    assert got == want, f"ours {tok.decode(got)!r}\nref  {tok.decode(want)!r}"


def _strings(n: int = 1000) -> list:
    """Deterministic test strings: edge cases first, then random mixes of scripts, whitespace and symbols."""
    edge = ["", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", " \n ", "a", " a", "a ", "  a  b   c  ",
            "hello world", "Hello, World!", "don't I'll we're", "1234567890", "3.14159", "x=1+2*3",
            "naïve café", "日本語のテキスト", "中文字符", "한국어", "Ελληνικά", "русский текст", "עברית", "العربية",
            "emoji 😀🎉👍🏽", "👨‍👩‍👧‍👦", "e\u0301", "\u200b", "\u00a0nbsp", "\ufeffbom", "tab\tsep\tvalues",
            "<|im_start|>user\nhi<|im_end|>", "<|endoftext|>", "<|im_start|><|im_end|>", "<not_special>",
            "def f(x):\n    return x ** 2\n", "    indented", "trailing   ", "multiple\n\n\nnewlines",
            "MiXeD CaSe", "UPPER", "ß", "ﬁ ligature", "\x00nul", "\x7f", "a" * 300, " " * 50, "🙂" * 20]
    rng = np.random.default_rng(45)
    pools = [" ", "  ", "\n", "\t", "\r\n", "a", "the", "The", " word", "ing", "é", "ü", "日", "本", "😀", "🎉",
             "0", "7", "42", ".", ",", "!", "?", "'s", "'", '"', "(", ")", "{", "}", "#", "$", "€", "\u200d",
             "\u0301", "<|im_end|>", "<|im_start|>", "ab", "ç", "ñ", "ø", "λ", "д", "ش", "ก", "—", "…"]
    out = list(edge)
    while len(out) < n:
        out.append("".join(rng.choice(pools, rng.integers(1, 24))))
    return out[:n]


def test_tokenizer_matches_reference_on_1000_strings(smollm2, reference):
    _, tok = smollm2
    _, ref_tok = reference
    strings = _strings()
    assert len(strings) == 1000
    for s in strings:
        want = ref_tok.encode(s, add_special_tokens=False)
        got = tok.encode(s)
        assert got == want, f"encode {s!r}: ours {got}, reference {want}"
        assert tok.decode(got) == ref_tok.decode(want), f"decode {s!r}"


def test_chat_template_matches_reference(smollm2, reference):
    _, tok = smollm2
    _, ref_tok = reference
    msgs = [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And 3+3?"}]
    for gen in (True, False):
        want = ref_tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
        assert tok.apply_chat_template(msgs, add_generation_prompt=gen) == want
