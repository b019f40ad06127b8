"""Functional ops: each picks a generated kernel variant and dispatches it."""
from .elementwise import add, mul, scale
from .matmul import matmul, matmul_backward

__all__ = ["add", "mul", "scale", "matmul", "matmul_backward"]
