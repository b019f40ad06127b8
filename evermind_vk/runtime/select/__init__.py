"""Kernel selection, one module per kernel family. Pure: no device access, no Vulkan.

Each family module holds, for its kernels:
  * ROWS: its rows of the variant table (`table.Row`): template, op, dtype, specialization constants, flags.
    `tools/codegen.py` imports every module of this package that defines ROWS (in module-name order) and
    generates exactly those kernels; nothing else declares a kernel, and the rules below refer to rows by
    their parameters (flags, tile), never by a generated name.
  * its preference order and its rules (which row may run a launch, which one comes first), with the tuned
    constants in a TUNED table beside the rule: value, a one-line reason and the bench/results file that
    justifies it (`table.Tuned`);
  * `plan(launch, device, knobs) -> Plan`: everything the op runs for one launch (the variants, their
    workgroups and push constants, any split into parts), so that the op executes the plan and makes no
    choice of its own. `launch` is the family's description of the work (shapes, dtypes, strides),
    `device` a runtime Device (its `info` and the manifest's usable variants), `knobs` the family's
    overrides (the EVERMIND_VK_* variables the op read).
  * where its kernels loop over the problem, `loop_count(op, spec, flags, push)`: the most loop iterations
    one invocation runs (None for ops that are not its own); `launch.py` asks every family, and the runtime
    refuses a launch past a device's loop cap (lavapipe's 65,535) before recording it.

Families: matmul (the strided, batched products and their splits), attention (fused kernels or the matmul
path, causal product chunks), rows (softmax, norms, cross entropy: one row a workgroup), scan (Mamba's
selective scans and the SSD), reduce (column sums, two-stage sums, L2 norms), embedding (lookups and their
backward paths), elementwise (VEC per thread), fixed (kernels with one variant each: no choice to make).
Shared: table (the row type and the tuned-constant record), features (what a row needs of a device),
bindings (storage-buffer limits), loops (the loop cap plan), launch (every family's loop counts).

Adding a family (e.g. quant.py for quantized matmuls): a new module here with ROWS (rows built with
`table.Row`, or a helper of the module that checks each row's own rules and raises on a row its template
cannot run), its rules and `plan`, and a `loop_count` if its kernels loop over the problem (then list it
in launch.FAMILIES). Codegen picks up ROWS by itself; the op that runs the kernels calls `plan` and
executes what it returns. A family module imports ..manifest, .table, .features, .bindings and .loops,
never ..kernels (which imports launch, and so the families). Adding a row to a family: one entry in its
ROWS (its rules decide where it runs; an entry in the family's order where it should come first), then
`python tools/codegen.py`. See docs/kernels-selection.md.
"""
