"""Hostile input, second pass (issue 42): exact NaN/Inf counts, regular files only with reads bounded by
the size at open, JSON structure bounded before parsing (RSS and time measured in subprocesses),
non-finite weights never saved or resumed silently, typed errors for mutated files, orphaned temp files
removed by the next save."""
import errno
import io
import json
import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest
from hypothesis import given, strategies as st

from evermind_vk.errors import (BlobError, CapacityError, EvermindError, FormatError, NonFiniteError,
                                NotRegularFileError, StructureLimitError, TokenError)
from evermind_vk.io import EvermindPackage, open_blob
from evermind_vk.io.atomic import temp_files
from evermind_vk.io.checkpoint import MAGIC as EVCK, decode, load_checkpoint, save_checkpoint
from evermind_vk.io.framing import frame
from evermind_vk.io.jsjson import check_json_structure, json_depth, loads
from evermind_vk.io.layouts import nonfinite_count, nonfinite_tensors
from evermind_vk.io.regular import open_regular, read_regular
from evermind_vk.io.tokens import load_token_list

BAR_MB, BAR_S = 64, 2.0


# -- 1. exact non-finite counts ----------------------------------------------------------------------
def test_nonfinite_count_is_exact_at_every_size():
    assert nonfinite_count(np.zeros(2 ** 20 + 1, np.float32)) == 0  # the chunked loop reported 1,048,577
    a = np.ones(3_000_000, np.float32)
    a[2_345_678] = np.inf
    assert nonfinite_count(a) == 1
    rng = np.random.default_rng(0)
    for n in (1, 2 ** 20 - 1, 2 ** 20, 2 ** 20 + 1, 3 * 2 ** 20 + 7):
        b = rng.standard_normal(n).astype(np.float32)
        idx = rng.choice(n, size=min(n, 5), replace=False)
        b[idx] = [np.nan, np.inf, -np.inf, np.nan, np.inf][:len(idx)]
        assert nonfinite_count(b) == int(np.count_nonzero(~np.isfinite(b))) == len(idx)
    assert nonfinite_count(np.arange(10)) == 0


def test_nonfinite_tensors_names_each_tensor_and_count():
    tree = {"params": {"w": np.array([1.0, np.nan, np.inf], np.float32), "b": np.zeros(3, np.float32)},
            "opt": [np.array([np.nan])]}
    assert nonfinite_tensors(tree) == [("params.w", 2), ("opt[0]", 1)]


# -- 3. regular files only -----------------------------------------------------------------------------
@pytest.fixture
def specials(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    d = tmp_path / "dir.evermind"
    d.mkdir()
    out = {"/dev/zero": "/dev/zero", "/dev/urandom": "/dev/urandom", "fifo": str(fifo), "directory": str(d)}
    for suffix in (".safetensors", ".npz", ".evermind", ".json", ".vrq0"):
        link = tmp_path / f"zero{suffix}"
        link.symlink_to("/dev/zero")
        out[f"link{suffix}"] = str(link)
        flink = tmp_path / f"fifo{suffix}"
        flink.symlink_to(fifo)
        out[f"fifolink{suffix}"] = str(flink)
    return out


def _loaders():
    from evermind_vk import files
    return {
        "open_blob": open_blob,
        "package": EvermindPackage.from_file,
        "load": files.load,
        "npz": files.load_model,
        "safetensors": files.import_safetensors,
        "checkpoint": lambda p: load_checkpoint(p if p.endswith(".json") or "/" in p else "./" + p),
        "codec": files.load_codec,
        "tokens": load_token_list,
        "read_regular": read_regular,
    }


@pytest.mark.parametrize("loader", sorted(_loaders()))
def test_special_files_are_refused_at_once_naming_the_path(specials, loader):
    fn = _loaders()[loader]
    old = signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("hung on a special file")))
    try:
        for name, path in specials.items():
            signal.alarm(5)
            t0 = time.perf_counter()
            with pytest.raises(NotRegularFileError) as ei:
                fn(path)
            signal.alarm(0)
            assert time.perf_counter() - t0 < 1.0, (loader, name)
            assert ei.value.filename == path and path in str(ei.value), (loader, name, str(ei.value))
            assert isinstance(ei.value, EvermindError) and isinstance(ei.value, OSError)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_reads_are_bounded_by_the_size_at_open(tmp_path):
    p = tmp_path / "grows"
    p.write_bytes(b"a" * 1000)
    with open_regular(p, "file") as rf:
        with open(p, "ab") as f:
            f.write(b"b" * 5000)  # appended after the open: never read
        assert rf.size == 1000 and bytes(rf.read_all()) == b"a" * 1000
        assert rf.read_at(990, 100) == b"a" * 10
    with open_regular(p, "file") as rf:
        os.truncate(p, 10)  # shrank after the open: a typed error, not a short read
        with pytest.raises(BlobError, match="shrank"):
            rf.read_all()
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing")


# -- 2. bounded JSON structure ------------------------------------------------------------------------
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(alphabet='a"\\[]{},:\u00e9 ', max_size=12),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text('ab"\\[', max_size=3), kids,
                                                                              max_size=3), max_leaves=30))
def test_prescan_measures_depth_and_strings_like_the_parser(value):
    """The pre-scan's depth equals the parsed depth (quotes, escapes and brackets inside strings
    included), its string limit is exact (on the escaped bytes), and its value count is at least the
    parsed values (object keys aside) and at most twice that plus one."""
    import evermind_vk.io.jsjson as J
    data = json.dumps(value).encode()
    depth = json_depth(value, 1000)
    longest = max([len(s.encode()) for s in _strings(value)] or [0])
    n_values = _values(value)
    for step in (3, 1 << 18):  # tiny steps: every boundary inside strings, escapes and brackets
        J._SCAN_STEP, saved = step, J._SCAN_STEP
        try:
            check_json_structure(data, "x", (depth, 2 * n_values + 1, 10 ** 9))  # not a wild overcount
            if n_values > 1:  # never an undercount
                with pytest.raises(StructureLimitError, match="values"):
                    check_json_structure(data, "x", (10 ** 9, n_values - 1, 10 ** 9))
            if depth:
                with pytest.raises(StructureLimitError, match="deeper"):
                    check_json_structure(data, "x", (depth - 1, 10 ** 9, 10 ** 9))
            raw_longest = max([len(json.dumps(s, ensure_ascii=True)) - 2 for s in _strings(value)] or [0])
            if raw_longest:
                check_json_structure(data, "x", (10 ** 9, 10 ** 9, raw_longest))
                with pytest.raises(StructureLimitError, match="string"):
                    check_json_structure(data, "x", (10 ** 9, 10 ** 9, raw_longest - 1))
        finally:
            J._SCAN_STEP = saved
    assert longest >= 0


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from _strings(x)


def _values(v) -> int:
    if isinstance(v, list):
        return 1 + sum(_values(x) for x in v)
    if isinstance(v, dict):
        return 1 + sum(_values(x) for x in v.values())
    return 1


def test_json_limits_follow_the_environment(monkeypatch):
    from evermind_vk.errors import ConfigError
    doc = b"[" + b",".join([b"1"] * 600_000) + b"]"
    with pytest.raises(StructureLimitError, match="EVERMIND_VK_JSON_MAX_ELEMENTS"):
        loads(doc, "x")
    monkeypatch.setenv("EVERMIND_VK_JSON_MAX_ELEMENTS", "700000")
    assert len(loads(doc, "x")) == 600_000
    monkeypatch.setenv("EVERMIND_VK_JSON_MAX_DEPTH", "2")
    with pytest.raises(StructureLimitError, match="deeper than 2"):
        loads(b"[[[1]]]", "x")
    monkeypatch.setenv("EVERMIND_VK_JSON_MAX_STRING", "lots")
    with pytest.raises(ConfigError, match="EVERMIND_VK_JSON_MAX_STRING"):
        loads(b"[]", "x")


def test_nan_and_infinity_are_not_json():
    for bad in (b"[NaN]", b"[Infinity]", b"{\"a\": -Infinity}"):
        with pytest.raises(FormatError, match="not JSON"):
            loads(bad, "x")


def _bomb_checkpoint(js: bytes) -> bytes:
    return frame(EVCK + struct.pack("<IQQ", 1, len(js), 0) + js, level=19)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    d = tmp_path_factory.mktemp("json-bombs")
    out = {}
    lists = b'{"metadata":{},"x":[' + b",".join([b"[]"] * 5_600_000) + b"]}"
    ck = _bomb_checkpoint(lists)
    assert len(ck) < 2048, len(ck)  # the 1.4 KB file (16.8 MB inside: the frame's own cap stops it)
    (d / "lists56.json").write_bytes(ck)
    out["lists_5.6M"] = (str(d / "lists56.json"),
                         "from evermind_vk.io.checkpoint import load_checkpoint; load_checkpoint(P)")
    lists = b'{"metadata":{},"x":[' + b",".join([b"[]"] * 5_500_000) + b"]}"  # within the frame's cap
    ck = _bomb_checkpoint(lists)
    assert len(ck) < 2048 and len(lists) < 16 << 20, len(ck)
    (d / "lists.json").write_bytes(ck)
    out["lists"] = (str(d / "lists.json"), "from evermind_vk.io.checkpoint import load_checkpoint; load_checkpoint(P)")
    out["lists_open_blob"] = (str(d / "lists.json"), "from evermind_vk.io import open_blob; open_blob(P)")
    s = b'{"metadata":{},"x":"' + b"a" * (16 << 20) + b'"}'
    ck = _bomb_checkpoint(s[:(16 << 20) - 100] + b'"}') if len(s) > 16 << 20 else _bomb_checkpoint(s)
    assert len(ck) < 1024, len(ck)  # the 563-byte file
    (d / "string.json").write_bytes(ck)
    out["string"] = (str(d / "string.json"),
                     "from evermind_vk.io.checkpoint import load_checkpoint; load_checkpoint(P)")
    nested = b'{"metadata":{},"x":' + b"[" * 10_000_000 + b"]" * 10_000_000 + b"}"
    (d / "doppler.json").write_bytes(nested)  # 20 MB of plain doppler JSON
    out["doppler_nested"] = (str(d / "doppler.json"),
                             "from evermind_vk.io.checkpoint import load_checkpoint; load_checkpoint(P)")
    flat = b'{"metadata":{},"x":[' + b",".join([b"[]"] * 6_600_000) + b"]}"
    (d / "doppler_flat.json").write_bytes(flat)  # 20 MB of plain doppler JSON, flat
    out["doppler_flat"] = (str(d / "doppler_flat.json"),
                           "from evermind_vk.io.checkpoint import load_checkpoint; load_checkpoint(P)")
    toks = b"[" + b",".join([b"1234"] * 8_200_000) + b"]"
    (d / "tokens.json").write_bytes(toks)  # 41 MB token list
    out["tokens"] = (str(d / "tokens.json"), "from evermind_vk.io.tokens import load_token_list; load_token_list(P)")
    small = b"[" + b",".join([b"1"] * 3_000_000) + b"]"  # 6 MB: under the size cap, over the value cap
    (d / "tokens_small.json").write_bytes(small)
    out["tokens_values"] = (str(d / "tokens_small.json"),
                            "from evermind_vk.io.tokens import load_token_list; load_token_list(P)")
    meta = json.dumps({"__metadata__": {"evermind_config": "a" * (50 << 20)}}).encode()
    (d / "meta.safetensors").write_bytes(struct.pack("<Q", len(meta)) + meta)
    out["safetensors_meta"] = (str(d / "meta.safetensors"), "import evermind_vk.files as f; f.load(P)")
    meta = json.dumps({"__metadata__": {"evermind_config": "a" * (8 << 20)}}).encode()  # under MAX_HEADER
    (d / "meta8.safetensors").write_bytes(struct.pack("<Q", len(meta)) + meta)
    out["safetensors_meta_8mb"] = (str(d / "meta8.safetensors"), "import evermind_vk.files as f; f.load(P)")
    return out


RUNNER = textwrap.dedent("""
    import sys, time
    import numpy, zstandard, safetensors, evermind_vk, evermind_vk.files, evermind_vk.io, evermind_vk.io.tokens
    P = sys.argv[1]
    before = int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS:")).split()[1])
    t0 = time.perf_counter()
    try:
        exec(sys.argv[2])
        outcome = "no error"
    except Exception as e:
        outcome = type(e).__name__ + ": " + " ".join(str(e).split())[:300]
    dt = time.perf_counter() - t0
    after = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
    print(outcome)
    print((after - before) / 1024, dt)
""")

BOMBS = ("lists_5.6M", "lists", "lists_open_blob", "string", "doppler_nested",
         "doppler_flat", "tokens", "tokens_values",
         "safetensors_meta", "safetensors_meta_8mb")


@pytest.mark.parametrize("case", BOMBS)
def test_json_bombs_stay_under_64_mb_and_2_s(bombs, case):
    path, code = bombs[case]
    r = subprocess.run([sys.executable, "-c", RUNNER, path, code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    outcome, measured = r.stdout.strip().splitlines()[-2:]
    grown, dt = (float(x) for x in measured.split())
    print(case, outcome, f"{grown:.1f} MB {dt:.2f} s")
    want = "LimitError" if case in ("lists_5.6M", "tokens", "safetensors_meta") else "StructureLimitError"
    assert outcome.split(":")[0] == want, outcome
    assert grown <= BAR_MB and dt <= BAR_S, (case, outcome, grown, dt)


# -- 6. typed errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"null", b"5", b"[[1]]", b"[" * 100 + b"]" * 100, b'["a"]', b"[NaN]",
                                     b"[1.5]", b"[-1]", b"[true]", b"{}", b"\xff", b""])
def test_bad_token_lists_are_typed_errors_naming_the_file(tmp_path, content):
    p = tmp_path / "toks.json"
    p.write_bytes(content)
    with pytest.raises((TokenError, BlobError)) as ei:
        load_token_list(str(p))
    assert str(p) in str(ei.value)
    assert load_token_list(_write(tmp_path / "ok.json", b"[0, 5, 7]"), vocab_size=8) == [0, 5, 7]
    with pytest.raises(TokenError, match=r"\[0, 6\)"):
        load_token_list(str(tmp_path / "ok.json"), vocab_size=6)


def _write(p, data: bytes) -> str:
    p.write_bytes(data)
    return str(p)


@pytest.mark.parametrize("field,value", [("lineage", "x"), ("lineage", 5), ("lineage", []), ("resumeAudits", "x"),
                                         ("resumeAudits", {})])
def test_checkpoint_with_bad_metadata_fields_is_a_format_error(tmp_path, field, value):
    for raw in (json.dumps({"metadata": {field: value}}).encode(),
                _bomb_checkpoint(json.dumps({"metadata": {field: value}}).encode())):
        with pytest.raises(FormatError, match=field):
            decode(raw)
        p = tmp_path / "c.json"
        p.write_bytes(raw)
        with pytest.raises(FormatError, match=field):
            load_checkpoint(str(p))
        with pytest.raises(FormatError, match=field):
            save_checkpoint(str(p), {"w": 1})


def test_mutated_npz_files_raise_only_typed_errors(tmp_path, device):
    from evermind_vk import files
    from evermind_vk.models import LMConfig, TransformerLM
    m = TransformerLM(LMConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=8, max_seq_len=8),
                      device=device)
    good = tmp_path / "m.npz"
    files.save_model(m, str(good))
    blob = good.read_bytes()
    rng = random.Random(42)
    outcomes = {}
    for i in range(300):
        b = bytearray(blob)
        how = rng.choice(("flip", "truncate", "insert", "zero"))
        if how == "flip":
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif how == "truncate":
            b = b[:rng.randrange(len(b))]
        elif how == "insert":
            at = rng.randrange(len(b))
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            at = rng.randrange(len(b))
            b[at:at + 16] = bytes(16)
        p = tmp_path / f"x{i}.npz"
        p.write_bytes(bytes(b))
        try:
            files.load(str(p), device=device)
            outcomes["loaded"] = outcomes.get("loaded", 0) + 1
        except EvermindError as e:
            outcomes[type(e).__name__] = outcomes.get(type(e).__name__, 0) + 1
        p.unlink()
    print(outcomes)
    assert set(outcomes) - {"loaded"}, outcomes  # every non-loading outcome was an EvermindError (or it raised)


def test_npz_with_crafted_headers_raise_typed_errors(tmp_path, device):
    """The mutations that escaped as tokenize.TokenError (an unbalanced .npy header: numpy re-tokenizes
    it) and as bare OSError / zip errors (central directory fields): each an EvermindError naming the file."""
    from evermind_vk import files
    from evermind_vk.models import LMConfig, TransformerLM
    m = TransformerLM(LMConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=8, max_seq_len=8),
                      device=device)
    good = tmp_path / "m.npz"
    files.save_model(m, str(good))
    blob = good.read_bytes()
    variants = []
    with zipfile.ZipFile(good) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    for name in members:
        for ch in b"([{,'":  # '(16, 8)' -> '((6, 8)' etc.: unbalanced; the zip's CRCs are recomputed
            raw = bytearray(members[name])
            raw[raw.index(b"'shape': (") + 10] = ch
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as zf:
                for n, data in members.items():
                    zf.writestr(n, bytes(raw) if n == name else data)
            variants.append(buf.getvalue())
    cd, eocd = blob.find(b"PK\x01\x02"), blob.rfind(b"PK\x05\x06")
    for where, fmt, val in ((cd + 42, "<I", 0xFFFFFFF0), (cd + 42, "<I", 5), (cd + 20, "<I", 0xFFFFFFFF),
                            (cd + 24, "<I", 0xFFFFFFFF), (cd + 28, "<H", 0xFFFF), (eocd + 12, "<I", 1 << 31),
                            (eocd + 16, "<I", 0xFFFFFFF0), (eocd + 10, "<H", 0xFFFF), (cd + 10, "<H", 99)):
        b = bytearray(blob)
        struct.pack_into(fmt, b, where, val)
        variants.append(bytes(b))
    for i, v in enumerate(variants):
        p = tmp_path / f"v{i}.npz"
        p.write_bytes(v)
        try:
            files.load(str(p), device=device)
        except EvermindError as e:
            assert str(p) in str(e), str(e)


def test_a_model_beyond_host_memory_is_a_capacity_error(monkeypatch, device):
    from evermind_vk import files
    from evermind_vk.models import LMConfig
    from evermind_vk.train.capacity import check_fits, training_bytes

    def no_memory(*a, **k):
        raise MemoryError("Unable to allocate 1.2 TiB")
    monkeypatch.setattr(files, "TransformerLM", no_memory)
    with pytest.raises(CapacityError, match="host memory"):
        files._build(LMConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=8), {}, device)
    shapes = {"a": (1024, 1024)}
    assert training_bytes(shapes.values()) == 32 << 20
    with pytest.raises(CapacityError, match="1,048,576 parameters"):
        check_fits(shapes, None, "m", available=(32 << 20) - 1)
    check_fits(shapes, None, "m", available=32 << 20)
    limit = device.info.max_storage_buffer_range
    from evermind_vk.errors import UnsupportedError
    with pytest.raises(UnsupportedError, match="maxStorageBufferRange"):
        check_fits({"big": (limit // 4 + 1,)}, device, "m", available=1 << 62)
    check_fits({"big": (limit // 4,)}, device, "m", available=1 << 62)


def test_a_model_beyond_a_gpus_memory_is_a_capacity_error(device):
    """On a GPU the training state (16 bytes a parameter) must fit the device-local heap (ci/patches/0012);
    on a CPU device the heap size says nothing (lavapipe reports 2 GiB and allocates host memory)."""
    import dataclasses
    import types
    from evermind_vk.train.capacity import check_fits
    shapes = {"a": (1024, 1024)}  # 16 MiB of device state
    gpu = lambda heap: types.SimpleNamespace(info=dataclasses.replace(  # noqa: E731
        device.info, type="discrete_gpu", device_memory=heap))
    with pytest.raises(CapacityError, match="device memory.*0.0 GiB"):
        check_fits(shapes, gpu((16 << 20) - 1), "m", available=1 << 62)
    check_fits(shapes, gpu(16 << 20), "m", available=1 << 62)
    check_fits(shapes, gpu(0), "m", available=1 << 62)  # no heap listed: not checked
    cpu = types.SimpleNamespace(info=dataclasses.replace(device.info, type="cpu", device_memory=1))
    check_fits(shapes, cpu, "m", available=1 << 62)


# -- 4. non-finite weights ----------------------------------------------------------------------------------
def test_checkpoints_with_nonfinite_arrays_are_not_written(tmp_path):
    w = np.ones(4, np.float32)
    w[2] = np.inf
    with pytest.raises(NonFiniteError, match=r"w \(1 NaN/Inf\)"):
        save_checkpoint("k", {"w": w, "ok": np.zeros(2)}, directory=str(tmp_path))
    assert not os.path.exists(tmp_path / "k.json")
    with pytest.raises(NonFiniteError):
        save_checkpoint("k", {"loss": float("nan")}, directory=str(tmp_path))
    save_checkpoint("k", {"w": w}, directory=str(tmp_path), allow_nonfinite=True)
    assert nonfinite_count(load_checkpoint("k", directory=str(tmp_path))["w"]) == 1


def test_models_and_packages_with_nonfinite_weights_are_not_saved(tmp_path, device):
    from evermind_vk import files
    from evermind_vk.models import LMConfig, TransformerLM
    m = TransformerLM(LMConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=8, max_seq_len=8),
                      device=device)
    sd = m.state_dict()
    sd["norm.weight"][3] = np.nan
    m.load_state_dict(sd)
    for save in (lambda p, **k: files.save_model(m, p, **k), lambda p, **k: files.export_safetensors(m, p, **k),
                 lambda p, **k: EvermindPackage.from_model(m, "x", **k).to_file(p)):
        p = str(tmp_path / "out.bin")
        with pytest.raises(NonFiniteError, match=r"norm.weight \(1 NaN/Inf\)"):
            save(p)
        assert not os.path.exists(p)
        save(p, allow_nonfinite=True)
        os.unlink(p)
    sd["norm.weight"][3] = 1e6  # finite in f32, Inf in f16
    m.load_state_dict(sd)
    EvermindPackage.from_model(m, "x")
    with pytest.raises(NonFiniteError, match="f16"):
        EvermindPackage.from_model(m, "x", fp16=True)


def _tiny_trainer(device, seed=0):
    from evermind_vk.models import LMConfig, TransformerLM
    from evermind_vk.train import Trainer
    m = TransformerLM(LMConfig(vocab_size=256, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=16,
                               max_seq_len=16, seed=seed), device=device)
    return Trainer(m, seed=seed)


def test_resume_refuses_a_poisoned_checkpoint_naming_tensor_and_count(tmp_path, device):
    from evermind_vk.train import Trainer
    tr = _tiny_trainer(device)
    tr.train("hello world, hello vulkan " * 4, seq_len=8, batch_size=2, max_steps=1)
    sd = tr.model.state_dict()
    sd["embed.weight"][0, :3] = np.nan
    tr.model.load_state_dict(sd)
    key = str(tmp_path / "ck.json")
    with pytest.raises(NonFiniteError, match=r"embed.weight \(3 NaN/Inf\)"):
        tr.save(key)
    assert not os.path.exists(key)
    tr.save(key, allow_nonfinite=True)
    with pytest.raises(NonFiniteError, match=r"params.embed.weight \(3 NaN/Inf\).*resume"):
        Trainer.from_checkpoint(key, device=device)
    assert Trainer.from_checkpoint(key, device=device, allow_nonfinite=True).global_step == 1


@pytest.mark.parametrize("save_every,poison_at,said,good", [(2, 3, "loss became", 2), (1, 2, "refusing to save", 1)])
def test_a_nonfinite_run_points_at_the_last_finite_checkpoint(tmp_path, device, save_every, poison_at, said, good):
    """Weights poisoned after step poison_at: either the next loss is NaN (no save between), or the
    save at that step is refused; both errors name the last finite checkpoint, which --resume loads."""
    from evermind_vk.train import Trainer
    tr = _tiny_trainer(device)
    key = str(tmp_path / "run.json")

    def poison(step, _metrics):
        if step == poison_at:
            sd = tr.model.state_dict()
            sd["norm.weight"][:] = np.inf
            tr.model.load_state_dict(sd)
    with pytest.raises(NonFiniteError) as ei:
        tr.train("hello world, hello vulkan " * 8, seq_len=8, batch_size=2, max_steps=6, save_key=key,
                 save_every=save_every, on_step=poison)
    msg = str(ei.value)
    assert said in msg and f"the last finite checkpoint is {key} (step {good})" in msg and "--resume" in msg, msg
    back = Trainer.from_checkpoint(key, device=device)  # what --resume continues: finite
    assert back.global_step == good and not nonfinite_tensors(back.model.state_dict())


# -- 8. orphaned temp files ---------------------------------------------------------------------------------
def _saver(d: str) -> int:
    """A forked child saving one key in a loop (no interpreter start per trial); returns its pid once
    it is about to save."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(r)
            wv = np.random.default_rng(os.getpid()).standard_normal(1 << 20).astype(np.float32)
            real_fsync = os.fsync
            os.fsync = lambda fd: (time.sleep(0.03), real_fsync(fd))  # a slow disk (this child only)
            os.write(w, b"r")
            while True:
                save_checkpoint("victim", {"w": wv}, directory=d)
        finally:
            os._exit(1)
    os.close(w)
    assert os.read(r, 1) == b"r"
    os.close(r)
    return pid


def _kill_savers(tmp_path, trials: int):
    d = str(tmp_path / "store")
    save_checkpoint("victim", {"w": np.ones(1 << 20, np.float32)}, directory=d)  # a lineage to continue
    rng = random.Random(7)
    left = 0
    for _ in range(trials):
        pid = _saver(d)
        time.sleep(rng.uniform(0.0, 0.8))  # a save takes ~0.1-0.3 s here: every phase of several saves
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        left += len(temp_files(os.path.join(d, "victim.json")))
        for tmp in temp_files(os.path.join(d, "victim.json")):  # never read as data: the store still loads
            assert os.path.basename(tmp).startswith(".victim.json.")
        assert load_checkpoint("victim", directory=d)["w"].shape == (1 << 20,)
    assert left > 0, "no saver was ever killed mid-write: the test would prove nothing"
    before = load_checkpoint("victim", directory=d)["metadata"]["lineage"]["sequence"]
    save_checkpoint("victim", {"w": np.zeros(4, np.float32)}, directory=d)
    assert temp_files(os.path.join(d, "victim.json")) == []
    assert load_checkpoint("victim", directory=d)["metadata"]["lineage"]["sequence"] == before + 1
    return left


def test_orphaned_temp_files_are_removed_by_the_next_save(tmp_path):
    _kill_savers(tmp_path, 20)


@pytest.mark.slow
def test_orphaned_temp_files_200_killed_savers(tmp_path, request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("200 killed savers (~2.5 min): run with -m slow")
    _kill_savers(tmp_path, 200)


def test_a_temp_file_of_a_live_writer_is_kept(tmp_path):
    """Only files older than the lock holder go: a planted symlink or a directory with a temp name is kept."""
    from evermind_vk.io.atomic import remove_orphans
    path = str(tmp_path / "k.json")
    young = tmp_path / ".k.json.0123456789abcdef.tmp"
    young.write_bytes(b"x")
    assert remove_orphans(path, time.time() - 60) == 0 and young.exists()
    link = tmp_path / ".k.json.fedcba9876543210.tmp"
    link.symlink_to(tmp_path / "victim")
    (tmp_path / "victim").write_bytes(b"keep")
    other = tmp_path / ".other.json.0123456789abcdef.tmp"
    other.write_bytes(b"x")
    assert remove_orphans(path, time.time() + 1) == 1
    assert not young.exists() and link.is_symlink() and other.exists() and (tmp_path / "victim").read_bytes() == b"keep"
