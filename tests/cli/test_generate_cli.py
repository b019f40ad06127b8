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
