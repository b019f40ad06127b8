"""Functional ops: each picks a generated kernel variant and dispatches it (forward and backward)."""
from .attention import attention, attention_backward
from .elementwise import add, mul, scale
from .matmul import gemm, gemm_strided, matmul, matmul_backward
from .nn import (bias_add, bias_add_backward, colsum, cross_entropy, cross_entropy_backward, embedding,
                 embedding_backward, gelu, gelu_backward, glu, glu_backward, layer_norm, layer_norm_backward,
                 reduce_sum, rms_norm, rms_norm_backward, rope, rope_backward, row_slice, row_slice_backward,
                 silu, silu_backward, softmax, softmax_backward)

residual_add = add

__all__ = [
    "add", "mul", "scale", "residual_add", "matmul", "matmul_backward", "gemm", "gemm_strided",
    "attention", "attention_backward", "softmax", "softmax_backward", "rms_norm", "rms_norm_backward",
    "layer_norm", "layer_norm_backward", "cross_entropy", "cross_entropy_backward", "embedding",
    "embedding_backward", "rope", "rope_backward", "bias_add", "bias_add_backward", "colsum", "row_slice",
    "row_slice_backward", "silu", "silu_backward", "gelu", "gelu_backward", "glu", "glu_backward", "reduce_sum",
]
