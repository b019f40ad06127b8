"""Bounded memory for every loader, measured: each bomb or tiny-file case of issue 15 runs in a fresh
subprocess that reads its RSS before (VmRSS) and its peak RSS after (VmHWM; not ru_maxrss, which Linux carries
over fork and exec from the parent, so a big pytest process would be measured instead); the growth must stay under 64 MB,
and the case must end in the typed error it names."""
import hashlib
import io
import json
import struct
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest
import zstandard

from evermind_vk.io.checkpoint import MAGIC as EVCK
from evermind_vk.io.jsjson import js_json
from evermind_vk.io.layouts import CRC_MAGIC, EVT0, MOE0, crc32

GIB = 1 << 30
BAR_MB = 64
# ~1.6 GB of f32 weights declared by a config (what the tiny files declared)
BIG_LM = {"vocab_size": 32000, "d_model": 1536, "n_layers": 12, "n_heads": 12, "n_kv_heads": 12, "d_ff": 6144,
          "max_seq_len": 256, "rope_theta": 10000.0, "norm_eps": 1e-6, "tie_embeddings": True, "swiglu_limit": 0.0,
          "seed": 0}


def _zstd_bomb(prefix: bytes, zeros: int) -> bytes:
    """One honest zstd frame (content size and checksum) of prefix + `zeros` zero bytes, built in steps."""
    cobj = zstandard.ZstdCompressor(level=1, write_content_size=True, write_checksum=True).compressobj(
        size=len(prefix) + zeros)
    out = [cobj.compress(prefix)]
    chunk = bytes(1 << 20)
    for _ in range(zeros >> 20):
        out.append(cobj.compress(chunk))
    out.append(cobj.compress(bytes(zeros & ((1 << 20) - 1))))
    out.append(cobj.flush())
    return b"".join(out)


def _sha256_zeros(n: int) -> str:
    h, chunk = hashlib.sha256(), bytes(1 << 20)
    for _ in range(n >> 20):
        h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    out = {}
    # 1. a checkpoint frame of ~32 KB that honestly holds 1 GiB (one zero array with its true sha256)
    n = GIB
    rec = {"metadata": {}, "w": {"__ndarray__": {"dtype": "uint8", "shape": [n], "offset": 0, "nbytes": n,
                                                 "sha256": _sha256_zeros(n)}}}
    js = json.dumps(rec).encode()
    ck = _zstd_bomb(EVCK + struct.pack("<IQQ", 1, len(js), n) + js, n)
    assert len(ck) < 64 << 10
    (d / "bomb.json").write_bytes(ck)  # a path key (ends in .json)
    out["checkpoint_bomb"] = str(d / "bomb.json")
    # 1b. the same frame with its header lying: it claims 16 MiB (within every cap) and holds 1 GiB
    fhd = ck[4]
    at = 5 + (0 if fhd & 0x20 else 1)
    width = {1: 2, 2: 4, 3: 8}[fhd >> 6]
    liar = ck[:at] + (16 << 20).to_bytes(width, "little") + ck[at + width:]
    assert zstandard.get_frame_parameters(liar).content_size == 16 << 20
    (d / "liar.json").write_bytes(liar)
    out["lying_header"] = str(d / "liar.json")
    # 2. the same kind of frame around an .evermind package of 1 GiB of zeros
    man = js_json({"schema": "evermind.model/1", "name": "b", "version": "1", "modelType": "evermind-transformer-lm",
                   "config": BIG_LM, "paramCount": 1, "checkpointFormat": "EVT0", "checkpointFp16": False,
                   "checksum": 0, "card": {}}).encode()
    pkg = _zstd_bomb(struct.pack("<3I", 0x45564D31, 1, len(man)) + man, GIB)
    (d / "bomb.evermind").write_bytes(pkg)
    out["package_bomb"] = str(d / "bomb.evermind")
    # 3. a 230-byte MoE0 package declaring 2^24 experts
    moe = struct.pack("<6I", MOE0, 1, 1, 1, 1 << 24, 1) + bytes(8)
    man = js_json({"schema": "evermind.model/1", "name": "m", "version": "1", "modelType": "shared-expert-moe",
                   "config": {"modelDim": 1, "hiddenDim": 1, "numExperts": 1 << 24, "topK": 1}, "paramCount": 1,
                   "checkpointFormat": "MoE0", "checkpointFp16": False, "checksum": 0, "card": {}}).encode()
    from evermind_vk.io.package import fnv1a32
    man = man.replace(b'"checksum":0', b'"checksum":%d' % fnv1a32(moe))
    (d / "moe.evermind").write_bytes(struct.pack("<3I", 0x45564D31, 1, len(man)) + man + moe)
    out["moe_experts"] = str(d / "moe.evermind")
    # 4. a ~300-byte package whose config declares a ~1.6 GB model, with one tiny EVT0 tensor
    evt = struct.pack("<3I", EVT0, 1, 1) + struct.pack("<I", 1) + b"a" + struct.pack("<2I", 1, 1) + bytes(4)
    evt += struct.pack("<II", CRC_MAGIC, crc32(evt))
    man = js_json({"schema": "evermind.model/1", "name": "t", "version": "1", "modelType": "evermind-transformer-lm",
                   "config": BIG_LM, "paramCount": 1, "checkpointFormat": "EVT0", "checkpointFp16": False,
                   "checksum": fnv1a32(evt), "card": {}}).encode()
    (d / "tiny.evermind").write_bytes(struct.pack("<3I", 0x45564D31, 1, len(man)) + man + evt)
    out["tiny_package"] = str(d / "tiny.evermind")
    # 5. a tiny npz and 6. a tiny safetensors with the same config
    buf = io.BytesIO()
    np.savez(buf, __config__=np.frombuffer(json.dumps(BIG_LM).encode(), np.uint8), a=np.zeros(1, np.float32))
    (d / "tiny.npz").write_bytes(buf.getvalue())
    out["tiny_npz"] = str(d / "tiny.npz")
    from safetensors.numpy import save
    (d / "tiny.safetensors").write_bytes(save({"a": np.zeros(1, np.float32)},
                                              metadata={"evermind_config": json.dumps(BIG_LM)}))
    out["tiny_safetensors"] = str(d / "tiny.safetensors")
    # 7. a ~1 MB npz: a real small model's members plus a deflated 1 GiB extra member
    small = dict(BIG_LM, vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=8)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        from evermind_vk.files import lm_param_shapes, _lm_config
        arrays = {k: np.full(s, 0.5, np.float32) for k, s in lm_param_shapes(_lm_config(small)).items()}
        arrays["__config__"] = np.frombuffer(json.dumps(small).encode(), np.uint8)
        for k, a in arrays.items():
            with zf.open(k + ".npy", "w") as f:
                np.lib.format.write_array(f, a)
        with zf.open("extra.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": (GIB,)})
            chunk = bytes(1 << 20)
            for _ in range(GIB >> 20):
                f.write(chunk)
    assert len(buf.getvalue()) < 2 << 20
    (d / "zipbomb.npz").write_bytes(buf.getvalue())
    out["npz_bomb"] = str(d / "zipbomb.npz")
    return out


CASES = {
    "checkpoint_bomb": ("LimitError", "from evermind_vk.io.checkpoint import load_checkpoint; load_checkpoint(P)"),
    "checkpoint_bomb_open_blob": ("LimitError", "from evermind_vk.io import open_blob; open_blob(P)"),
    "package_bomb": ("LimitError", "from evermind_vk.io import EvermindPackage; EvermindPackage.from_file(P)"),
    "package_bomb_open_blob": ("LimitError", "from evermind_vk.io import open_blob; open_blob(P)"),
    "lying_header": ("IntegrityError", "from evermind_vk.io.checkpoint import load_checkpoint; load_checkpoint(P)"),
    "moe_experts": ("FormatError", "from evermind_vk.io import EvermindPackage as E\n"
                                   "v = E.from_file(P).validate(); assert not v['ok'], v\n"
                                   "raise __import__('evermind_vk').errors.FormatError(v['errors'][0])"),
    "tiny_package": ("FormatError", "import evermind_vk.files as f; f.load(P)"),
    "tiny_npz": ("ShapeError", "import evermind_vk.files as f; f.load(P)"),
    "tiny_safetensors": ("ShapeError", "import evermind_vk.files as f; f.load(P)"),
    "npz_bomb": ("LimitError", "import evermind_vk.files as f; f.load(P)"),
}

RUNNER = textwrap.dedent("""
    import sys
    import numpy, zstandard, evermind_vk, evermind_vk.files, evermind_vk.io  # baseline: everything imported
    P = sys.argv[1]
    # the baseline is the RSS now (not the peak so far, which import-time spikes could leave above it)
    before = int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS:")).split()[1])
    try:
        exec(sys.argv[2])
        outcome = "no error"
    except Exception as e:
        outcome = type(e).__name__ + ": " + str(e)[:300]
    after = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
    print(outcome)
    print((after - before) / 1024)
""")


@pytest.mark.parametrize("case", sorted(CASES))
def test_bombs_and_tiny_files_stay_under_64_mb(files, case):
    want, code = CASES[case]
    path = files[case.replace("_open_blob", "")]
    r = subprocess.run([sys.executable, "-c", RUNNER, path, code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    outcome, grown = r.stdout.strip().splitlines()[-2:]
    print(case, outcome, f"{float(grown):.1f} MB")
    assert float(grown) < BAR_MB, (case, outcome, grown)
    assert outcome.startswith(want), outcome


def test_a_frame_within_the_ratio_still_loads(tmp_path):
    """The ratio cap is not a size cap: 40 MB of random-ish weights (ratio ~1) load."""
    from evermind_vk.io.checkpoint import load_checkpoint, save_checkpoint
    w = np.random.default_rng(0).standard_normal(10 << 20).astype(np.float32)
    save_checkpoint("big", {"w": w}, directory=str(tmp_path))
    assert np.array_equal(load_checkpoint("big", directory=str(tmp_path))["w"], w)
    z = np.zeros(10 << 20, np.float32)  # 40 MB of zeros: a bomb by ratio unless the caller allows it
    save_checkpoint("zeros", {"w": z}, directory=str(tmp_path))
    from evermind_vk.errors import LimitError
    with pytest.raises(LimitError, match="max_ratio"):
        load_checkpoint("zeros", directory=str(tmp_path))
    assert load_checkpoint("zeros", directory=str(tmp_path), max_ratio=1e6)["w"].shape == z.shape
