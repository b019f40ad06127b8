"""`evermind-vk train --model evermind-lm|moe` writes a loadable .evermind; `generate --model x.evermind`
samples from a text package and refuses the MoE (not a text model)."""
import numpy as np

import evermind_vk as ev
from evermind_vk.cli import main
from evermind_vk.models import EvermindLM, SharedExpertMoE


def test_train_and_generate(device, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 8)
    for kind, cls in (("evermind-lm", EvermindLM), ("moe", SharedExpertMoE)):
        out = tmp_path / kind
        assert main(["train", "--model", kind, "--text", str(text), "--d-model", "8", "--d-ff", "8", "--seq-len", "16",
                     "--batch-size", "2", "--time-limit", "3", "--out", str(out), "--sample-tokens", "5"]) == 0
        assert isinstance(ev.load(str(out / "model.evermind")), cls)
    capsys.readouterr()
    assert main(["generate", "--model", str(tmp_path / "evermind-lm" / "model.evermind"), "--tokens", "5",
                 "--prompt", "the "]) == 0
    assert capsys.readouterr().out.startswith("the ")
    assert main(["generate", "--model", str(tmp_path / "moe" / "model.evermind")]) == 2
