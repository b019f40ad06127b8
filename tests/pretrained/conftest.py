"""Fixtures of the pretrained-model tests: the packaged SmolLM2-135M GGUF loaded once per session, ours and
Hugging Face transformers' (the reference: the same file dequantized to f32, on the CPU). Each skips with a
message when its package is missing (ci/setup.sh installs them)."""
import os

import pytest


def _need(mod: str, how: str):
    return pytest.importorskip(mod, reason=f"{mod} is not installed ({how})")


@pytest.fixture(scope="session")
def smollm2_path():
    _need("gguf", "pip install 'evermind-vk[pretrained]'")
    _need("tokenizers", "pip install 'evermind-vk[pretrained]'")
    from evermind_vk.errors import UnsupportedError
    from evermind_vk.files import resolve
    try:
        return resolve("smollm2-135m")
    except UnsupportedError as e:
        pytest.skip(f"the packaged SmolLM2 is not installed: {e}")


@pytest.fixture(scope="session")
def smollm2(smollm2_path, device):
    """(our LlamaLM, our tokenizer) from the packaged file."""
    import evermind_vk as ev
    return ev.load(smollm2_path, device=device)


@pytest.fixture(scope="session")
def reference(smollm2_path):
    """(transformers model in f32 on the CPU, its tokenizer) from the same GGUF."""
    _need("torch", "the CPU build: EVERMIND_TORCH=1 bash ci/setup.sh")
    _need("transformers", "pip install transformers accelerate")
    _need("accelerate", "pip install transformers accelerate")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    d, f = os.path.split(smollm2_path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    return model, tok
