"""GGUF files as hostile input, hyper-parameters from the metadata, the typed refusals, and the command line
(generate, chat, QLoRA train) on small files written with gguf's own writer."""
import json
import os

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed (pip install 'evermind-vk[pretrained]')")
pytest.importorskip("tokenizers", reason="tokenizers is not installed (pip install 'evermind-vk[pretrained]')")

import evermind_vk as ev  # noqa: E402
from evermind_vk.cli import main  # noqa: E402
from evermind_vk.errors import (EvermindError, FormatError, NotRegularFileError, UnsupportedArchitectureError,  # noqa: E402
                                UnsupportedError)
from evermind_vk.io.gguf import read_gguf  # noqa: E402
from evermind_vk.files import unpermute_rows  # noqa: E402
from tiny_gguf import write_tiny  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(write_tiny(tmp_path_factory.mktemp("gguf") / "tiny.gguf", theta=5000.0, eps=3e-6))


def test_hyper_parameters_come_from_the_metadata(tiny, device):
    model, tok = ev.load(tiny, device=device)
    c = model.config
    assert (c.d_model, c.n_layers, c.n_heads, c.n_kv_heads, c.d_ff) == (64, 1, 2, 1, 64)
    assert c.rope_theta == 5000.0 and abs(c.norm_eps - 3e-6) < 1e-12 and c.tie_embeddings
    assert c.vocab_size == tok.vocab_size == len(read_gguf(tiny).metadata["tokenizer.ggml.tokens"])
    assert set(model.qweights) >= {"embed.weight", "layers.0.attn.wq", "layers.0.mlp.w_gate_up"}
    assert tok.encode("<|im_start|>the") == [1] + tok.encode("the")  # control tokens stay whole
    assert tok.encode(" the") == [tok.token_to_id("Ġthe")] and tok.decode(tok.encode(" the")) == " the"
    logits = model.forward(ev.tensor(np.array(tok.encode("the the"), np.uint32))).numpy()
    assert np.isfinite(logits).all()


def test_kept_prefix_gives_the_same_continuation(tiny, device):
    """A chat's later turn run over the cached earlier turns (keep_prefix) equals running it from scratch."""
    from evermind_vk.train.decode import decoder
    from evermind_vk.train.generate import generate
    model, tok = ev.load(tiny, device=device)
    turn1 = tok.encode(tok.apply_chat_template([{"role": "user", "content": "the theme"}]))
    reply = generate(model, turn1, 6, keep_prefix=True)
    msgs = [{"role": "user", "content": "the theme"}, {"role": "assistant", "content": tok.decode(reply)},
            {"role": "user", "content": "the thesis"}]
    turn2 = tok.encode(tok.apply_chat_template(msgs))
    dec = decoder(model, 1)  # the recorded decoder's cache holds the first turn's fed tokens
    n = dec.length[0]
    assert n > 0 and dec.cached[0] == (turn1 + reply)[:n]
    stats = {}
    kept = generate(model, turn2, 6, keep_prefix=True, stats=stats)
    assert 0 < stats["prefill_tokens"] < len(turn2)  # only the positions past the kept prefix were run
    assert kept == generate(model, turn2, 6)


def test_unpermute_undoes_the_converters_permutation():
    """llama.cpp's converter: rows (h, 2, j) -> (h, j, 2); unpermute_rows is its inverse."""
    heads, hd, cols = 3, 8, 5
    w = np.arange(heads * hd * cols).reshape(heads * hd, cols)
    permuted = w.reshape(heads, 2, hd // 2, cols).swapaxes(1, 2).reshape(w.shape)
    assert np.array_equal(unpermute_rows(permuted, heads), w)
    assert not np.array_equal(unpermute_rows(w, heads), w)


def test_unknown_architecture_is_refused(tmp_path, device):
    p = write_tiny(tmp_path / "gpt.gguf", arch="gpt2")
    with pytest.raises(UnsupportedArchitectureError):
        ev.load(str(p), device=device)


def test_hostile_files(tmp_path, tiny, device):
    data = open(tiny, "rb").read()
    cases = {"magic": b"GGUX" + data[4:], "short": data[:20], "header": data[:400], "tensors": data[: len(data) // 2],
             "count": data[:8] + (10**9).to_bytes(8, "little") + data[16:]}
    for name, blob in cases.items():
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(blob)
        with pytest.raises(EvermindError):
            ev.load(str(p), device=device)
    with pytest.raises(NotRegularFileError):
        read_gguf(tmp_path)  # a directory
    nan = write_tiny(tmp_path / "nan.gguf", mutate=lambda n, a: np.where(n == "output_norm.weight", np.nan, a))
    with pytest.raises(FormatError, match="NaN"):
        ev.load(str(nan), device=device)
    bf16 = tmp_path / "bf16.gguf"
    _write_bf16(bf16)
    with pytest.raises(UnsupportedError, match="BF16"):
        read_gguf(bf16)


def _write_bf16(path):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("token_embd.weight", gguf.quants.quantize(np.ones((4, 32), np.float32), gguf.GGMLQuantizationType.BF16),
                 raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_cli_generate_chat_and_qlora_train(tiny, tmp_path, capsys):
    assert main(["generate", "--model", tiny, "--prompt", "the", "--tokens", "4", "--temperature", "0"]) == 0
    got = capsys.readouterr()
    assert got.out.startswith("the") and "decode" in got.err and "prefill" in got.err
    # --batch N continuations (each the greedy one), the rates line; --sampler builderforce is EvermindLM's only
    assert main(["generate", "--model", tiny, "--prompt", "the", "--tokens", "4", "--temperature", "0",
                 "--batch", "2"]) == 0
    got2 = capsys.readouterr()
    assert got2.out.count("--- ") == 2 and "batch 2" in got2.err
    assert got2.out.split("--- 2/2 ---")[1].strip() == got.out.strip()
    assert main(["generate", "--model", tiny, "--prompt", "the", "--sampler", "builderforce"]) == 2
    assert "EvermindLM's" in capsys.readouterr().err
    assert main(["chat", "--model", tiny, "--message", "hi", "--message", "the", "--tokens", "3"]) == 0
    assert capsys.readouterr().out.count("assistant> ") == 2
    text = tmp_path / "t.txt"
    text.write_text("the theme of the thesis " * 40)
    out = tmp_path / "run"
    assert main(["train", "--model", tiny, "--lora-rank", "2", "--text", str(text), "--seq-len", "16",
                 "--batch-size", "1", "--max-steps", "2", "--out", str(out), "--merge", "--prompt", "hi",
                 "--sample-tokens", "2"]) == 0
    printed = capsys.readouterr().out
    assert "held-out perplexity before" in printed and "after" in printed
    cfg = json.load(open(out / "adapter_config.json"))
    assert cfg["peft_type"] == "LORA" and cfg["r"] == 2 and "q_proj" in cfg["target_modules"]
    assert os.path.isfile(out / "adapter_model.safetensors") and os.path.isfile(out / "merged" / "model.safetensors")
    # --lora-rank on a model trained from scratch is refused, not ignored
    assert main(["train", "--lora-rank", "2", "--out", str(tmp_path / "x")]) == 2
