"""The small models the recorded-decoding tests share (tests/train/test_decode.py, test_decode_chain.py): a
TransformerLM on the per-op step (CFG) and one on decode_layer (CFG_FUSED), an EvermindLM and HybridMamba stacks,
their weights scaled so that the next token depends on the whole context."""
import numpy as np

from evermind_vk.models import LMConfig, TransformerLM

CFG = LMConfig(vocab_size=17, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, max_seq_len=12, seed=2)
# a model whose decode step runs on decode_layer (head dim 8; CFG's 4 runs the per-op step)
CFG_FUSED = LMConfig(vocab_size=17, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, max_seq_len=12, seed=2)


def _model(cfg):
    m = TransformerLM(cfg)
    # larger weights than the init's, so that the next token depends on the whole context
    m.load_state_dict({k: (v * 10 if v.ndim == 2 else v) for k, v in m.state_dict().items()})
    return m


def _evermind():
    from evermind_vk.models import EvermindLM, EvermindLMConfig
    m = EvermindLM(EvermindLMConfig(19, d_model=16, num_layers=2, conv_kernel=3, hidden_dim=24, num_experts=3,
                                    top_k=2, seed=5))
    rng = np.random.default_rng(1)  # random conv taps (the init's are the identity: a receptive field of 1)
    m.load_state_dict({k: (rng.standard_normal(v.shape).astype(np.float32) if k.endswith(".conv") else
                           v * 20 if v.ndim == 2 else v) for k, v in m.state_dict().items()})
    return m


def _mamba(layers, **kw):
    from evermind_vk.models import HybridMambaConfig, HybridMambaModel
    m = HybridMambaModel(HybridMambaConfig(**{**dict(vocabSize=19, dModel=16, numLayers=len(layers), layers=layers,
                                                     dState=4, dConv=3, expand=2, nHeads=2, seed=3), **kw}))
    m.load_state_dict({k: v * 5 if v.ndim == 2 and "embedding" not in k else v for k, v in m.state_dict().items()})
    return m
