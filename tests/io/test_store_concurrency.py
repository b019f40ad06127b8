"""The checkpoint store under concurrency and hostile directories: per-key lock (threads and processes),
unique O_EXCL|O_NOFOLLOW temp files removed on error, permissions kept, new directories fsynced,
colliding sanitised keys refused; and typed errors for hostile checkpoint contents."""
import json
import os
import stat
import struct
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from evermind_vk.errors import (CheckpointKeyCollisionError, CheckpointMismatchError, FormatError)
from evermind_vk.io import atomic, framing
from evermind_vk.io.checkpoint import MAGIC, decode, load_checkpoint, save_checkpoint, verify


def test_two_threads_saving_one_key_never_corrupt_it(tmp_path):
    d, errors = str(tmp_path), []

    def saver(t):
        try:
            for i in range(25):
                save_checkpoint("k", {"t": t, "i": i, "w": np.full(5000, i, np.float32)}, directory=d)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    ths = [threading.Thread(target=saver, args=(t,)) for t in range(2)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    assert errors == []
    rec = load_checkpoint("k", directory=d)
    assert rec["metadata"]["lineage"]["sequence"] == 50 and (rec["w"] == rec["i"]).all()
    assert [n for n in os.listdir(d) if n.endswith(".tmp")] == []


SAVER = textwrap.dedent("""
    import sys, numpy as np
    from evermind_vk.io.checkpoint import load_checkpoint, save_checkpoint
    d, who = sys.argv[1], sys.argv[2]
    seqs = []
    for i in range(100):
        if who == "b" and i % 2:  # a forced resume re-saves (sequence + 1) under the same lock
            s = load_checkpoint("shared", {"configHash": f"b{i}"}, force_resume=True, directory=d)
        else:
            s = save_checkpoint("shared", {"who": who, "i": i, "w": np.full(64, i, np.float32)}, directory=d)
        seqs.append(s["metadata"]["lineage"]["sequence"])
        rec = load_checkpoint("shared", directory=d)  # loadable after every save (hash and arrays verified)
        assert rec is not None and (rec["w"] == rec["i"]).all()
    print(" ".join(map(str, seqs)))
""")


def test_two_processes_times_100_saves_give_sequences_1_to_200(tmp_path):
    ps = [subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), w], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for w in "ab"]
    outs = [p.communicate(timeout=300) for p in ps]
    assert all(p.returncode == 0 for p in ps), [o[1][-2000:] for o in outs]
    seqs = [int(x) for o in outs for x in o[0].split()]
    assert sorted(seqs) == list(range(1, 201))
    rec = load_checkpoint("shared", directory=str(tmp_path))
    assert rec["metadata"]["lineage"]["sequence"] == 200


def test_forced_resume_resave_continues_the_lineage(tmp_path):
    d = str(tmp_path)
    save_checkpoint("r", {"v": 1}, directory=d, configHash="a")
    forced = load_checkpoint("r", {"configHash": "b"}, force_resume=True, directory=d)
    # doppler's semantics: the re-save keeps the stored checkpoint's fields (expected only decides what mismatches)
    assert forced["metadata"]["lineage"]["sequence"] == 2 and forced["metadata"]["configHash"] == "a"
    assert forced["metadata"]["resumeAudits"][-1]["mismatchedFields"] == ["configHash"]
    with pytest.raises(CheckpointMismatchError):
        load_checkpoint("r", {"configHash": "c"}, directory=d)


def test_a_planted_symlink_at_the_temp_name_cannot_redirect_the_write(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    target = tmp_path / "ck.bin"
    # the name the old code used, predictable from the pid:
    os.symlink(victim, tmp_path / f".ck.bin.tmp{os.getpid()}")
    atomic.atomic_write(str(target), b"new")
    assert victim.read_bytes() == b"precious" and target.read_bytes() == b"new" and not target.is_symlink()
    # the unpredictable name, forced to collide: O_EXCL|O_NOFOLLOW refuses it and another name is drawn
    names = iter(["planted", "fresh"])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n: next(names))
    os.symlink(victim, tmp_path / ".ck.bin.planted.tmp")
    atomic.atomic_write(str(target), b"newer")
    assert victim.read_bytes() == b"precious" and target.read_bytes() == b"newer"
    assert os.path.islink(tmp_path / ".ck.bin.planted.tmp")
    # a symlink planted at the lock file is refused, not followed
    os.symlink(victim, tmp_path / ".ck.json.lock")
    with pytest.raises(OSError, match="symlink"):
        save_checkpoint(str(tmp_path / "ck.json"), {"v": 1})
    assert victim.read_bytes() == b"precious"


def test_temp_file_removed_when_the_write_fails(tmp_path, monkeypatch):
    def boom(*a):
        raise OSError("disk on fire")
    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        atomic.atomic_write(str(tmp_path / "x"), b"data")
    assert os.listdir(tmp_path) == []


def test_permissions_of_an_existing_checkpoint_are_kept(tmp_path):
    s = save_checkpoint("p", {"v": 1}, directory=str(tmp_path))
    os.chmod(s["path"], 0o600)
    save_checkpoint("p", {"v": 2}, directory=str(tmp_path))
    assert stat.S_IMODE(os.stat(s["path"]).st_mode) == 0o600
    os.chmod(s["path"], 0o640)
    load_checkpoint("p", {"configHash": "z"}, force_resume=True, directory=str(tmp_path))
    assert stat.S_IMODE(os.stat(s["path"]).st_mode) == 0o640


def test_directories_created_on_the_way_are_fsynced(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    path = tmp_path / "a" / "b" / "c" / "ck.json"
    save_checkpoint(str(path), {"v": 1})
    for parent in (tmp_path, tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert str(parent) in synced, (parent, synced)


def test_keys_that_sanitise_to_one_file_are_refused(tmp_path):
    d = str(tmp_path)
    s = save_checkpoint("run é", {"v": 1}, directory=d)
    assert s["path"].endswith("run__.json")
    for other in ("run ü", "run ?"):
        with pytest.raises(CheckpointKeyCollisionError, match="run é"):
            save_checkpoint(other, {"v": 2}, directory=d)
        with pytest.raises(CheckpointKeyCollisionError):
            load_checkpoint(other, directory=d)
    assert load_checkpoint("run é", directory=d)["metadata"]["lineage"] == {
        "checkpointKey": "run é", "sequence": 1, "previousCheckpointHash": None}


# -- typed errors ---------------------------------------------------------------------------------
def _evck(record: dict, body: bytes = b"") -> bytes:
    js = json.dumps(record).encode()
    return framing.frame(MAGIC + struct.pack("<IQQ", 1, len(js), len(body)) + js + body)


def test_deeply_nested_json_is_a_format_error():
    for depth in (100000, 5000, 900, 200):
        nested = "[" * depth + "]" * depth
        doppler = ('{"metadata": {"checkpointHash": null}, "x": ' + nested + "}").encode()
        with pytest.raises(FormatError):
            _, stored = decode(doppler)
            verify(stored)  # recurses over the record (stable JSON) when the reader let it through
        js = ('{"metadata": {}, "x": ' + nested + "}").encode()
        with pytest.raises(FormatError):
            _, stored = decode(framing.frame(MAGIC + struct.pack("<IQQ", 1, len(js), 0) + js))
            verify(stored)


def test_array_shape_and_byte_size_mismatches_are_format_errors():
    body = bytes(20)
    import hashlib
    ref = {"dtype": "uint8", "shape": [20, 2], "offset": 0, "nbytes": 20, "sha256": hashlib.sha256(body).hexdigest()}
    # 100 bytes of padding JSON so the old overflow guard stops multiplying after the first dimension
    with pytest.raises(FormatError, match="cannot be 20 bytes"):
        decode(_evck({"metadata": {}, "a": {"__ndarray__": ref}, "pad": "x" * 100}, body))
    ref2 = dict(ref, shape=[1 << 40, 1 << 40, 0], nbytes=0, sha256=hashlib.sha256(b"").hexdigest())
    with pytest.raises(FormatError, match="beyond any array size"):
        decode(_evck({"metadata": {}, "a": {"__ndarray__": ref2}}, b""))


def test_ndarray_metadata_compares_with_expected_metadata(tmp_path):
    d = str(tmp_path)
    env = np.arange(3, dtype=np.int32)
    save_checkpoint("m", {"v": 1}, directory=d, environmentMetadata=env)
    rec = load_checkpoint("m", {"environmentMetadata": np.arange(3, dtype=np.int32)}, directory=d)
    assert rec["v"] == 1
    with pytest.raises(CheckpointMismatchError, match="environmentMetadata"):
        load_checkpoint("m", {"environmentMetadata": np.arange(4, dtype=np.int32)}, directory=d)
    with pytest.raises(CheckpointMismatchError, match="environmentMetadata"):
        load_checkpoint("m", {"environmentMetadata": [0, 1, 2]}, directory=d)
