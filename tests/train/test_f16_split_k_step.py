"""f16 split-K in the mixed-precision step (issue 13, items 4-5): the selection rule on an H200-like device
(as bench/matmul_selection.py fakes one) splits the under-filled weight gradients of the 23.7M LM and
nothing else, and a step with the split forced matches the unsplit f16 step."""
import collections
import dataclasses

import numpy as np

from evermind_vk.errors import EvermindError
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.runtime import kernels, variants
from evermind_vk.runtime.select import matmul as select_matmul
from evermind_vk.train import Trainer


# The H200's VK_NV_cooperative_matrix2 shapes of f16 x f16 -> f32 at workgroup scope (driver 580: ci/patches/0011).
H200_FLEXIBLE = ((32, 16, 16, 0, 0, 1, 1, 2, 128), (32, 32, 16, 0, 0, 1, 1, 2, 256))


def h200_like_step(device, monkeypatch, precision, multiprocessors=0, flexible=()):
    """Record one training step of the 23.7M config (bench/train_bench.py's) on the local device dressed as a
    discrete GPU with 48 KiB of shared memory, every feature and `multiprocessors` (cooperative_matrix2 only with
    `flexible`, its shapes), while kernels.dispatch only
    logs: returns the dispatches ((variant name, push constants) in order) and every matmul_split_k decision
    (((M, N, K), S)). Nothing executes, so the loss read back is whatever the never-written buffer held and
    the trainer's non-finite-loss check may fire after recording; only that error is accepted."""
    monkeypatch.delenv("EVERMIND_VK_MATMUL_SPLIT_K", raising=False)
    monkeypatch.delenv("EVERMIND_VK_MATMUL_VARIANT", raising=False)
    monkeypatch.setattr(device, "info", dataclasses.replace(
        device.info, type="discrete_gpu", shared_memory=49152, subgroup_size=32, multiprocessors=multiprocessors,
        features={k: k != "cooperative_matrix2" or bool(flexible) for k in device.info.features},
        cooperative_matrix_flexible_shapes=flexible))
    dispatches, splits = [], []
    monkeypatch.setattr(kernels, "dispatch", lambda v, tensors, push, groups, *rest: dispatches.append((v.name, push)))
    real = variants.matmul_split_k

    def split_k(M, N, K, groups, *args, **kw):
        s = real(M, N, K, groups, *args, **kw)
        splits.append(((M, N, K), s))
        return s
    monkeypatch.setattr(select_matmul, "matmul_split_k", split_k)
    cfg = LMConfig(d_model=512, n_layers=8, n_heads=8, n_kv_heads=4, d_ff=1408, max_seq_len=256)
    tr = Trainer(TransformerLM(cfg), precision=precision)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, 16 * 256 * 2 + 2)
    try:
        tr.train(ids, epochs=1, seq_len=256, batch_size=16, max_steps=1)
    except EvermindError as e:
        if "loss became" not in str(e):
            raise
    return dispatches, splits, cfg


def _weight_grad_sums(dispatches, split):
    """The column sums of split weight gradients: colsum_f32 launches over S rows of M*N partial sums."""
    want = {(s, M * N) for (M, N, _), s in split.items()}
    return sum(1 for n, p in dispatches if n == "colsum_f32" and (p["rows"], p["cols"]) in want)


def test_h200_like_selection_splits_the_f16_weight_gradients(device, monkeypatch):
    """One f16 step of the 23.7M config (d 512, 8 layers, 8/4 heads, ff 1408, batch 16 x 256: bench/train_bench.py)
    with nothing executed (kernels.dispatch logs instead) on the local device dressed as a discrete GPU with
    48 KiB of shared memory and every feature. Its weight gradients X^T dY (K = 4,096 tokens) run whole
    on 32-352 tiles of 64x64, or on 8-88 of 128x128: they split, 4-16 ways onto 128x128 cooperative-matrix
    tiles, f32 partials (c32) summed straight into the f32 gradient of the master weight (colsum_f32;
    F.matmul_master: never rounded to f16, no cast back). Every other product fills the device whole (or has a
    short K) and does not split."""
    dispatches, splits, cfg = h200_like_step(device, monkeypatch, "f16")  # multiprocessors unknown
    names = [n for n, _ in dispatches]
    split = {p: s for p, s in splits if s > 1}
    # dW of: the embedding's tied output projection [V=256, d], q/o [d, d], gate+up [2 ff, d], down [d, ff]
    # (A = X^T m-contiguous), K = B x L = 4,096
    assert split == {(256, 512, 4096): 16, (512, 512, 4096): 16, (2816, 512, 4096): 4, (512, 1408, 4096): 8}, split
    assert {p for p, s in splits if s == 1} >= {(4096, 512, 512), (4096, 2816, 512), (4096, 512, 1408)}  # filled
    n_split = sum(1 for _, s in splits if s > 1)
    # and attention's dK and dV (matmul path on a GPU): each of a group's G = 2 heads writes an f32 partial
    # through a c32 row, one column sum per layer and gradient (ops/attention.py)
    G, attn = cfg.n_heads // cfg.n_kv_heads, 2 * cfg.n_layers
    assert names.count("colsum_cast_f16") == attn and n_split > 0  # only attention's partials round to f16
    assert _weight_grad_sums(dispatches, split) == n_split
    assert names.count("cast_f32_f16") == 1  # the embedding's f16 output gradient; no weight's goes through f16
    assert names.count("loss_unscale_f32") == 1  # the norm's; AdamW unscales the gradients (unscale_grads(in_place=False))
    c32 = [n for n in names if n.startswith("matmul") and "c32" in n.split("_")]
    # 128x128 tiles; the partial launches (batch S) have fewer than 512 workgroups: variants.CM_FEW's row
    split_c32 = [n for n in c32 if n.endswith("t128x128k32")]
    assert len(split_c32) == n_split and all("_cm_" in n for n in split_c32), set(split_c32)
    assert len(c32) - len(split_c32) == G * attn, collections.Counter(c32)


def test_h200_like_selection_with_cooperative_matrix2(device, monkeypatch):
    """The same step on a device that also has VK_NV_cooperative_matrix2 with the H200's shapes: the products go
    to cm2 tiles, and only the weight gradients no cm2 tile of 128x128 or more fills the device with whole split
    (variants.CM2_ORDER): the output projection's and q/o's, 16 ways onto cm2 c32 rows; gate+up's (44 tiles of
    128x256) and down's (44 of 128x128) in 2 (variants.cm2_pair_split), their chunks on their tile's c32 twin."""
    dispatches, splits, cfg = h200_like_step(device, monkeypatch, "f16", flexible=H200_FLEXIBLE)
    names = [n for n, _ in dispatches]
    split = {p: s for p, s in splits if s > 1}
    assert split == {(256, 512, 4096): 16, (512, 512, 4096): 16, (2816, 512, 4096): 2, (512, 1408, 4096): 2}, split
    n_split = sum(1 for _, s in splits if s > 1)
    attn = 2 * cfg.n_layers
    assert names.count("colsum_cast_f16") == attn and _weight_grad_sums(dispatches, split) == n_split
    mm = [n for n in names if n.startswith("matmul")]
    assert sum("_cm2_" in n for n in mm) > 0.9 * len(mm), collections.Counter(mm)
    assert "matmul_f16_cm2_l256_c32_t128x256k32" in names  # q/o's dW, split
    # the pair splits' chunks (batch 2, K 2,048) on the planned tile's twin, not the 128x128 a fresh pick gives them
    pairs = [(n, p["M"], p["N"]) for n, p in dispatches if n.startswith("matmul") and p["K"] == 2048]
    assert set(pairs) == {("matmul_f16_cm2_l256_c32_t128x256k32", 2816, 512),
                          ("matmul_f16_cm2_l256_c32_t128x128", 512, 1408)}, set(pairs)
    assert "matmul_f16_cm2_l128_t64x64" not in {n for n, p in dispatches if p.get("K") == 4096}


def test_f16_step_with_split_k_forced_matches_the_unsplit_step(device, monkeypatch):
    """lavapipe never splits by itself: EVERMIND_VK_MATMUL_SPLIT_K=2 splits every product it can (K a multiple
    of 32: the forward and backward projections and the weight gradients over B x L = 128 tokens) into f32
    partials. The two runs differ only by where f32 sums are rounded to f16, so losses and pre-clip gradient
    norms agree within f16 tolerance over 6 AdamW steps, and so do the weights, except where AdamW's
    normalised step (about lr whatever the gradient's size) turns a near-zero gradient's rounding into a
    different move: at most 2 lr a step, on a few elements (2 of 4,096 of one matrix on lavapipe)."""
    cfg = LMConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=128, max_seq_len=32, seed=1)
    text = "mixed precision split-K sums f32 partials and rounds once. " * 20
    lr, steps, runs = 3e-3, 6, {}
    for env in ("", "2"):
        monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", env)
        tr = Trainer(TransformerLM(cfg), precision="f16")
        tr.train(text, epochs=1, seq_len=32, batch_size=4, lr=lr, max_steps=steps, track_grad_norm=True)
        labels = tr.step_program(32, 4, track_grad_norm=True).labels
        runs[env] = ([h["loss"] for h in tr.history], [h["grad_norm"] for h in tr.history], tr.model.state_dict(),
                     labels)
    (l0, g0, w0, lab0), (l1, g1, w1, lab1) = runs[""], runs["2"]
    def c32(labels):
        return sum(1 for lb in labels if lb.startswith("matmul") and "c32" in lb.split("_"))
    # unsplit, attention's dK/dV group partials (GPUs: the matmul path, 2 column sums a layer, G = 2 c32
    # launches each; none on lavapipe's fused path) sum f32 partials, and every weight gradient (6 a layer and
    # the tied output projection) is one c32 product into the f32 master's gradient (F.matmul_master); split,
    # the other products too
    attn = lab0.count("colsum_cast_f16")
    assert attn in (0, 2 * cfg.n_layers) and c32(lab0) == 2 * attn + 6 * cfg.n_layers + 1
    assert lab1.count("colsum_cast_f16") > attn and c32(lab1) > c32(lab0)
    assert len(l0) == len(l1) == steps
    np.testing.assert_allclose(l1, l0, rtol=2e-3)
    np.testing.assert_allclose(g1, g0, rtol=5e-3)
    off = 0
    for k in w0:
        assert np.max(np.abs(w1[k] - w0[k])) <= 2 * lr * steps, k
        off += np.sum(~np.isclose(w1[k], w0[k], rtol=1e-2, atol=5e-4))
    assert off <= 1e-3 * sum(w.size for w in w0.values()), off
    assert any(not np.array_equal(w1[k], w0[k]) for k in w0)  # the split really ran


def test_h200_like_f32_step_splits_weight_gradients_in_whole_waves(device, monkeypatch):
    """The f32 step of the 23.7M config on the local device dressed as a GPU with 132 multiprocessors (the
    H200's count) and 48 KiB of shared memory, nothing executed: the weight gradients on 256x128 tiles split
    by variants.wave_split (one wave each), and the chunks that 4,096 tokens' 16s do not divide evenly run
    one launch each on the planned tile (its aligned twin: whole tiles), followed by one column sum."""
    names, splits, _ = h200_like_step(device, monkeypatch, "f32", multiprocessors=132)
    split = {p: s for p, s in splits if s > 1}
    # gate+up [2 ff, d] on 44 tiles: 3 chunks (132 workgroups); down [d, ff] on 22: 6 (132); q/o [d, d] on 8
    # tiles: 16 (128). The forward of down and dX of gate+up (K 1,408 / 2,816) would split 64 tiles only 2 ways:
    # they run 128x128 whole instead (variants.WAVE_SPLIT_MIN)
    assert split[(2816, 512, 4096)] == 3 and split[(512, 1408, 4096)] == 6, split
    assert (4096, 512, 1408) not in split and (4096, 512, 2816) not in split, split
    assert {"matmul_f32_rb8x8_al_ukk_t128x128k16", "matmul_f32_rb8x8_al_ukn_t128x128k16"} <= {n for n, _ in names}
    uneven = [(n, p) for n, p in names if n == "matmul_f32_rb16x8_al_umn_t256x128" and p["K"] in (1376, 1344, 688, 656)]
    # per layer: gate+up's dW 1,376 1,376 1,344; down's 688 x 5 and 656
    assert collections.Counter(p["K"] for _, p in uneven) == {1376: 16, 1344: 8, 688: 40, 656: 8}, uneven[:3]
