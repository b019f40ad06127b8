"""Variant rows and launch choices, one module per kernel family (codegen reads the rows, ops the choices)."""
