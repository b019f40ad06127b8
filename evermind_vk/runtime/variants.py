"""Compatibility: the selection rules live in runtime/select/, one module per kernel family (see its
package docstring). This module re-exports the names it used to define, for importers not yet moved."""
from __future__ import annotations

from .select.features import (  # noqa: F401
    CM2_TYPES, DTYPE_FEATURES, FLAG_FEATURES, device_errors, features_for)
from .select.bindings import (  # noqa: F401
    binding_count, binding_errors, max_bindings, within_binding_limit)
from .select.loops import (  # noqa: F401
    DEVICE_LOOP_CAP, LoopLimitError, MAX_LOOP, check_loop, loop_chunks)
from .select.launch import (  # noqa: F401
    launch_loop_count, launch_loop_errors)
from .select.elementwise import (  # noqa: F401
    elementwise_vec)
from .select.reduce import (  # noqa: F401
    colsum_plan, final_sum_loops, multi_slots, pick_norm_multi)
from .select.rows import (  # noqa: F401
    CPU_ROW_ELEMS, NORM_BLOCK_ROWS, NORM_REG_COLS, ROW_PASSES, SOFTMAX_ROW_ELEMS, forced_variant,
    norm_backward_row_loops, norm_block_rows, pick_row_wg, pick_softmax)
from .select.embedding import (  # noqa: F401
    EMBEDDING_BACKWARD_PATHS, RANK_LANES, RANK_THREADS, embedding_backward_cols, embedding_backward_path,
    embedding_rank_lanes, search_loops)
from .select.matmul import (  # noqa: F401
    BIG_TILE_AREA, CM2_MIN_GROUPS, CM2_ORDER, CM2_PAIR_MIN_AREA, CM2_PAIR_MIN_GROUPS, CM2_PAIR_MIN_K, CM_FEW,
    CM_ORDER, CPU_V4_THREADS, GPU_FIRST_AMONG_EQUALS, Layout, MATMUL_BUFFERS, MAX_PADDED, TRI, TRI_TILES,
    UNIT_LAYOUTS, V4_MIN_WORK, WAVE_SPLIT_MAX, WAVE_SPLIT_MIN, aligned, batch_chunks, c32_twin, cm2_pair_split,
    cm_shared_bytes, k_chunks, local_size, matmul_k_splits, matmul_kind, matmul_launch_errors,
    matmul_loop_count, matmul_row_errors, matmul_split_k, matmul_tile, padded_area, pick_matmul, raster_group,
    rb_shared_bytes, register_block, split_allowed, split_tile, split_ways, subgroup_grid, tile_preference,
    tri_errors, unit_layout, variant_launch_errors, wave_split, wave_split_pays, whole_tile_errors)
from .select.attention import (  # noqa: F401
    ATTENTION_LOOP_LIMIT, ATTENTION_MAX_HD, ATTENTION_PATHS, TRI_SPLIT_BELOW, TRI_SPLIT_GROUPS, TRI_SPLIT_MIN_K,
    attention_launch_errors, attention_params, attention_path, attention_row_errors, attention_shared_bytes,
    pick_attention, tri_chunks, tri_split)
from .select.scan import (  # noqa: F401
    SCAN_MAX_CHUNK, SCAN_MAX_CHUNKS, scan_chunk_len, scan_errors, ssd_chunk_len, ssd_launch_errors,
    ssd_loop_count, ssd_row_errors, ssd_shared_bytes)
