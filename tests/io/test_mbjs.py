"""MBJS (builderforce's HybridMambaModel weights) and the evermind-hybrid-mamba .evermind type (issue 12)."""
import shutil
import struct
import subprocess

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.errors import FormatError, IntegrityError, TruncatedError
from evermind_vk.files import HYBRID_MAMBA, export_mbjs, import_mbjs
from evermind_vk.io.layouts import CRC_MAGIC, MBJS, crc32, parse_mbjs, to_f16_truncating
from evermind_vk.io.package import EvermindPackage
from evermind_vk.models import HybridMambaConfig, HybridMambaModel


def model(layers=("mamba1", "attention", "mamba3", "mamba2", "mamba1"), seed=3):
    return HybridMambaModel(HybridMambaConfig(vocabSize=11, dModel=8, numLayers=len(layers), layers=tuple(layers),
                                              dState=4, nHeads=2, seed=seed))


def test_v2_layout_and_round_trip(device):
    m = model()
    blob = export_mbjs(m)
    magic, ver, nl = struct.unpack_from("<3I", blob, 0)
    assert (magic, ver, nl) == (MBJS, 2, 5)
    assert blob[:4] == b"SJBM"
    assert list(blob[12:20]) == [0, 3, 2, 1, 0, 0, 0, 0]  # layer types, padded to 4
    (npar,) = struct.unpack_from("<I", blob, 20)
    assert npar == len(m.params)
    numels = struct.unpack_from(f"<{npar}I", blob, 24)
    assert list(numels) == [t.numel for t in m.params.values()]
    assert struct.unpack_from("<2I", blob, len(blob) - 8) == (CRC_MAGIC, crc32(blob[:-8]))
    m2 = import_mbjs(model(seed=9), blob)
    for k, t in m.params.items():
        assert t.numpy().tobytes() == m2.params[k].numpy().tobytes(), k
    assert export_mbjs(m2) == blob


def test_v3_fp16_truncates_like_builderforce(device):
    m = model(("mamba1",))
    blob = export_mbjs(m, fp16=True)
    f = parse_mbjs(blob)
    assert f["version"] == 3 and f["fp16"]
    flat = np.concatenate([t.numpy().ravel() for t in m.params.values()])
    got = np.frombuffer(blob, "<u2", flat.size, 20 + 4 * len(m.params))
    np.testing.assert_array_equal(got, to_f16_truncating(flat))
    assert len(blob) < len(export_mbjs(m)) * 0.6


JS_F16 = """
const f = new Float32Array(1), u = new Uint32Array(f.buffer);
const conv = (v) => { f[0] = v; const b = u[0], s = (b >>> 31) & 1, e = (b >>> 23) & 255, m = b & 0x7fffff;
  if (e === 255) return (s << 15) | 0x7c00 | (m ? 0x200 : 0);
  const ea = e - 127 + 15;
  if (ea >= 31) return (s << 15) | 0x7c00;
  if (ea <= 0) { if (ea < -10) return s << 15; return (s << 15) | ((m | 0x800000) >> (14 - ea)); }
  return (s << 15) | (ea << 10) | (m >> 13); };
console.log(JSON.stringify(%s.map(conv)));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_f16_truncation_matches_js_across_ranges():
    vals = np.array([0.0, -0.0, 1.0, 65519.0, 65520.0, 1e6, -1e6, 6e-5, 3e-8, 1e-8, -2.5e-6, 0.1, -0.3333,
                     np.float32(np.pi), 5.96e-8, 6.1e-5, np.inf, -np.inf], np.float32)
    vals = np.concatenate([vals, np.random.default_rng(0).standard_normal(200).astype(np.float32) * 10.0 ** np.arange(-6, 4).repeat(20)])
    js = JS_F16 % ("[" + ",".join("Infinity" if v == np.inf else "-Infinity" if v == -np.inf else repr(float(v))
                                  for v in vals) + "]")
    want = np.array(eval(subprocess.run(["node", "-e", js], capture_output=True, text=True, check=True).stdout), np.uint16)
    np.testing.assert_array_equal(to_f16_truncating(vals), want)


def test_legacy_v1_reads_as_all_mamba1(device):
    m = model(("mamba1", "mamba1"))
    arrays = [t.numpy().ravel() for t in m.params.values()]
    v1 = struct.pack(f"<3I{len(arrays)}I", MBJS, 1, len(arrays), *(a.size for a in arrays)) + b"".join(a.tobytes() for a in arrays)
    m2 = import_mbjs(model(("mamba1", "mamba1"), seed=7), v1)
    for k, t in m.params.items():
        np.testing.assert_array_equal(t.numpy(), m2.params[k].numpy())
    with pytest.raises(FormatError):
        import_mbjs(model(("mamba1", "attention")), v1)


def test_hostile_blobs(device):
    m = model()
    blob = export_mbjs(m)
    bad = bytearray(blob)
    bad[40] ^= 1
    with pytest.raises(IntegrityError):
        parse_mbjs(bytes(bad))
    with pytest.raises(TruncatedError):
        parse_mbjs(blob[:-20])
    with pytest.raises(FormatError):
        parse_mbjs(b"\0" * 32)
    with pytest.raises(FormatError):
        import_mbjs(model(("mamba1", "attention", "mamba3", "mamba1", "mamba1")), blob)
    bad = bytearray(blob)
    bad[13] = 9  # layer type code out of range
    with pytest.raises(FormatError):
        parse_mbjs(bytes(bad[:-8]) + struct.pack("<2I", CRC_MAGIC, crc32(bytes(bad[:-8]))))


def test_evermind_package_round_trips_bit_exactly(device):
    m = model()
    pkg = EvermindPackage.from_model(m, name="mamba-test")
    assert pkg.manifest["modelType"] == HYBRID_MAMBA
    blob = pkg.to_blob()
    m2 = EvermindPackage.from_blob(blob).load_model()
    assert isinstance(m2, HybridMambaModel) and m2.config == m.config
    for k, t in m.params.items():
        assert t.numpy().tobytes() == m2.params[k].numpy().tobytes(), k
    ids = ev.tensor(np.array([1, 2, 3, 4], np.uint32))
    np.testing.assert_array_equal(m.forward(ids).numpy(), m2.forward(ids).numpy())
    assert EvermindPackage.from_model(m2, name="mamba-test").to_blob() == blob
