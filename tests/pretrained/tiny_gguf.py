"""Write small llama GGUF files with gguf's GGUFWriter (byte-level vocabulary, a few merges, a chat template,
quantized matrices), for tests that need no downloaded model."""
import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFWriter, quants

from evermind_vk.io.gguf_tokenizer import _bytes_to_unicode

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def vocab():
    base = sorted(set(_bytes_to_unicode().values()))
    merged = ["Ġt", "he", "Ġthe"]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + base + merged
    types = [3, 3, 3] + [1] * (len(base) + len(merged))
    return tokens, types, ["Ġ t", "h e", "Ġt he"]


def write_tiny(path, arch="llama", d=64, layers=1, heads=2, kv_heads=1, ff=64, qtype=QT.Q8_0, seed=0,
               theta=10000.0, eps=1e-5, mutate=None):
    """A small model file; mutate(name, array) -> array may alter a float tensor before it is written."""
    rng = np.random.default_rng(seed)
    tokens, types, merges = vocab()
    V, hd = len(tokens), d // heads
    w = GGUFWriter(str(path), arch)
    w.add_block_count(layers)
    w.add_context_length(128)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(eps)
    w.add_rope_dimension_count(hd)
    w.add_vocab_size(V)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template(TEMPLATE)

    def mat(name, rows, cols, kind=qtype):
        a = (rng.standard_normal((rows, cols)) * 0.2).astype(np.float32)
        if mutate:
            a = mutate(name, a)
        if kind == QT.F32:
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, quants.quantize(a, kind), raw_dtype=kind)

    def vec(name, n):
        a = (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
        w.add_tensor(name, mutate(name, a) if mutate else a)
    mat("token_embd.weight", V, d, QT.Q8_0)
    vec("output_norm.weight", d)
    for i in range(layers):
        b = f"blk.{i}."
        vec(b + "attn_norm.weight", d)
        vec(b + "ffn_norm.weight", d)
        mat(b + "attn_q.weight", heads * hd, d)
        mat(b + "attn_k.weight", kv_heads * hd, d)
        mat(b + "attn_v.weight", kv_heads * hd, d)
        mat(b + "attn_output.weight", d, heads * hd)
        mat(b + "ffn_gate.weight", ff, d)
        mat(b + "ffn_up.weight", ff, d)
        mat(b + "ffn_down.weight", d, ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
