"""`evermind-vk generate` prints prefill and decode tokens/s for every text model type and samples --batch N
continuations at once; `profile --generate` profiles the recorded decode step."""
import re

import pytest

import evermind_vk.cli.generate as cli_generate
from evermind_vk.cli import main
from evermind_vk.models import (EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel, LMConfig,
                                TransformerLM)

MODELS = {
    "transformer": lambda: TransformerLM(LMConfig(d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=16, max_seq_len=32)),
    "evermind": lambda: EvermindLM(EvermindLMConfig(256, d_model=8, num_layers=1, hidden_dim=8, num_experts=2, top_k=1)),
    "mamba": lambda: HybridMambaModel(HybridMambaConfig(dModel=8, numLayers=1, dState=4, expand=1)),
}
RATES = re.compile(r"prefill (\d+) tokens at [\d.]+ tokens/s, decode [\d.]+ tokens/s")


@pytest.mark.parametrize("kind", MODELS)
def test_generate_prints_rates_and_batches(device, monkeypatch, capsys, kind):
    m = MODELS[kind]()
    monkeypatch.setattr(cli_generate, "load_model", lambda path, **kw: m)
    assert main(["generate", "--model", "x", "--prompt", "ab", "--tokens", "4", "--seed", "3"]) == 0
    got = capsys.readouterr()
    assert got.out.startswith("ab") and RATES.search(got.err) and RATES.search(got.err).group(1) == "2"
    assert main(["generate", "--model", "x", "--prompt", "ab", "--tokens", "3", "--batch", "3"]) == 0
    got = capsys.readouterr()
    assert got.out.count("--- ") == 3 and "batch 3" in got.err and RATES.search(got.err)


@pytest.mark.parametrize("kind,kernel", [("lm", "attention_decode"), ("evermind-lm", "evermind_layer"),
                                         ("mamba", "mamba1_decode")])
def test_profile_generate(device, capsys, kind, kernel):
    shape = ["--d-ff", "16"] if kind != "mamba" else []
    assert main(["profile", "--generate", "--model", kind, "--batch-size", "2", "--seq-len", "8", "--d-model", "16",
                 "--layers", "1", "--repeats", "1", *shape]) == 0
    out = capsys.readouterr().out
    assert "one decode step" in out and kernel in out and "sample" in out


@pytest.mark.parametrize("kind", MODELS)
def test_prompt_ids_take_every_flag(device, monkeypatch, capsys, kind):
    """--prompt-ids runs recorded decoding with every flag (--batch, --stop-ids, --top-p, --repetition-penalty)
    for every text model type (an EvermindLM with --sampler device; its default is builderforce's sampler), one
    line of ids a continuation, and the rates on stderr."""
    from evermind_vk.train import generate
    m = MODELS[kind]()
    monkeypatch.setattr(cli_generate, "load_model", lambda path, **kw: m)
    extra = ["--sampler", "device"] if kind == "evermind" else []
    greedy = generate(m, [3, 1, 4], max_new_tokens=5, repetition_penalty=1.5)
    assert main(["generate", "--model", "x", "--prompt-ids", "3,1,4", "--tokens", "5", "--temperature", "0",
                 "--repetition-penalty", "1.5", "--batch", "2", *extra]) == 0
    got = capsys.readouterr()
    lines = got.out.strip().splitlines()
    assert lines == [",".join(map(str, [3, 1, 4] + greedy))] * 2 and "batch 2" in got.err and RATES.search(got.err)
    stop = greedy[2]
    assert main(["generate", "--model", "x", "--prompt-ids", "3,1,4", "--tokens", "5", "--temperature", "0",
                 "--repetition-penalty", "1.5", "--stop-ids", str(stop), *extra]) == 0
    want = greedy[:greedy.index(stop)]
    assert capsys.readouterr().out.strip() == ",".join(map(str, [3, 1, 4] + want))
    assert main(["generate", "--model", "x", "--prompt-ids", "3,1,4", "--tokens", "4", "--top-p", "0.5",
                 "--seed", "2", *extra]) == 0
    out = capsys.readouterr().out.strip()
    assert out == ",".join(map(str, [3, 1, 4] + generate(m, [3, 1, 4], max_new_tokens=4, top_p=0.5, seed=2,
                                                          temperature=0.8, top_k=20)))


@pytest.mark.parametrize("argv,what", [
    (["--prompt-ids", "3,1", "--top-p", "0.5"], "--top-p: builderforce's sampler"),
    (["--prompt-ids", "3,1", "--batch", "2", "--repetition-penalty", "2"], "--repetition-penalty, --batch"),
    (["--prompt-ids", "3,1", "--stop-ids", "1,2"], "several --stop-ids"),
    (["--prompt-ids", "3,1", "--stop", "a"], "--stop-ids"),
    (["--prompt-ids", "3,1", "--stop-ids", "300"], "outside the vocabulary of 256"),
    (["--prompt-ids", "3,1", "--stop-ids", "x"], "--stop-ids 'x'"),
])
def test_flags_builderforce_sampler_cannot_take_are_refused(device, monkeypatch, capsys, argv, what):
    """An EvermindLM given --prompt-ids samples with builderforce's sampler: a flag it has no counterpart for is
    refused (exit 2, one line naming it), never ignored."""
    m = MODELS["evermind"]()
    monkeypatch.setattr(cli_generate, "load_model", lambda path, **kw: m)
    assert main(["generate", "--model", "x", *argv]) == 2
    err = capsys.readouterr().err
    assert what in err and len(err.strip().splitlines()) == 1, err


def test_builderforce_sampler_is_evermind_lms(device, monkeypatch, capsys):
    m = MODELS["transformer"]()
    monkeypatch.setattr(cli_generate, "load_model", lambda path, **kw: m)
    assert main(["generate", "--model", "x", "--prompt-ids", "3", "--sampler", "builderforce"]) == 2
    assert "not a TransformerLM's" in capsys.readouterr().err
    m = MODELS["evermind"]()  # an EvermindLM's --prompt-ids: builderforce's numbers; --prompt text with --sampler too
    monkeypatch.setattr(cli_generate, "load_model", lambda path, **kw: m)
    assert main(["generate", "--model", "x", "--prompt-ids", "3,1", "--tokens", "4", "--seed", "5",
                 "--temperature", "1", "--top-k", "0"]) == 0
    ids = capsys.readouterr().out.strip()
    assert ids == ",".join(map(str, [3, 1] + m.generate([3, 1], 4, temperature=1.0, seed=5)))
    assert main(["generate", "--model", "x", "--prompt", "ab", "--tokens", "4", "--seed", "5", "--temperature", "1",
                 "--top-k", "0", "--sampler", "builderforce"]) == 0
    new = m.generate([97, 98], 4, temperature=1.0, seed=5)
    assert capsys.readouterr().out.strip() == bytes([97, 98] + new).decode("utf-8", "replace").strip()


def test_profile_generate_chain(device, capsys):
    """profile --generate --chain K profiles one replay of K decode steps (K rounded down to a power of two): the
    steps' kernels K times, the picks passed on between them; --chain without --generate is refused."""
    assert main(["profile", "--generate", "--model", "lm", "--batch-size", "2", "--seq-len", "8", "--d-model", "16",
                 "--layers", "1", "--d-ff", "16", "--repeats", "1", "--chain", "5"]) == 0
    out = capsys.readouterr().out
    assert "one replay of 4 decode steps" in out and "scatter_strided" in out
    assert re.search(r"sample_f32\S*\s+4\s", out), out
    assert main(["profile", "--chain", "4"]) == 2
    assert "needs --generate" in capsys.readouterr().err
