#!/usr/bin/env python3
"""Long hostile-input fuzz of the blob readers and the checkpoint store (run outside CI):
    python tools/fuzz_blobs.py [N=100000] [seed=0]

Attack classes (one per input, drawn at random):
  mutate     valid checkpoints and .evermind packages mutated (truncate, bit flips, grown length fields,
             corrupted JSON, inserted bytes, random splices), at the frame and inside it
  bomb       honest zstd frames of highly compressible content (64 MiB .. 1 GiB of zeros in ~2-33 KB),
             as checkpoints and packages, sometimes with the header's content size lying or bytes mutated
  tiny       tiny .evermind / .npz / .safetensors files whose config declares a huge model (random
             dimensions), and MoE0 / EVL0 / VRQ0 / EVT0 layouts whose headers claim huge counts
  zipbomb    .npz files with a deflated member of 1 GiB in ~1 MB (sometimes mutated)
  race       (every 2000 inputs) two threads saving one key, and (every 10000) two processes: the
             sequences must be exactly 1..N and the final checkpoint loadable
  symlink    (every 500 inputs) symlinks planted at the temp names (the old predictable one, and the
             unpredictable one forced to collide) and at the lock file: the victim must stay untouched
  special    /dev/zero, /dev/urandom, a FIFO, a directory, and symlinks to them (named .evermind,
             .safetensors, .npz, .json, .vrq0) given to every path-taking loader: NotRegularFileError
  jsonbomb   parsed-structure bombs (deep nesting, ~0.5-6M values, 4-16 MB strings, NaN, and valid
             documents near each limit) in every format's JSON: framed and doppler checkpoints, package
             manifests, safetensors headers and config metadata, npz configs, token lists
  poison     valid packages, npz and safetensors models with NaN/Inf weights (load: NonFiniteError) and
             checkpoint payloads with them (save: NonFiniteError, nothing written)

Every input must load or raise a BlobError (ShapeError for a model whose tensors do not match its
config; TokenError for a token list of non-integers; NotRegularFileError for a special file; OSError
naming the symlink for a planted lock file); anything else, a special file that is not refused, a
poisoned model that loads, a peak of more than 64 MiB
of traced Python memory for one input, or more than 64 MiB of RSS over the baseline, is a failure.
Prints counts per outcome, the peak traced memory and the peak RSS."""
import collections
import io
import json
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import zipfile

import numpy as np
import zstandard

from evermind_vk.errors import BlobError, NonFiniteError, NotRegularFileError, ShapeError, TokenError, UnsupportedError
from evermind_vk.files import load as load_model_file, load_codec, save_model, export_safetensors
from evermind_vk.io.tokens import load_token_list
from evermind_vk.io import atomic, framing, open_blob
from evermind_vk.io.checkpoint import MAGIC as EVCK, decode, load_checkpoint, save_checkpoint, verify
from evermind_vk.io.jsjson import js_json
from evermind_vk.io.layouts import (CRC_MAGIC, EVL0, EVT0, MOE0, VRQ0, build_evl0, crc32, evl_shapes, parse_evl0,
                                    parse_evt0, parse_moe0, parse_vrq0)
from evermind_vk.io.package import EvermindPackage, fnv1a32

LIMIT = 64 << 20
LM = {"vocab_size": 16, "d_model": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 2, "d_ff": 8, "max_seq_len": 8,
      "rope_theta": 10000.0, "norm_eps": 1e-6, "tie_embeddings": True, "swiglu_limit": 0.0, "seed": 0}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key)) / 1024


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def seeds():
    d = tempfile.mkdtemp()
    s = save_checkpoint("f", {"w": np.arange(300, dtype=np.float32), "h": np.arange(7, dtype=np.float16),
                              "nested": {"a": [1, 2.5e-7, "x", None], "b": {"c": True}}}, directory=d)
    ck = open(s["path"], "rb").read()
    cfg = {"vocabSize": 5, "dModel": 4, "numLayers": 1, "convKernel": 3, "hiddenDim": 6, "numExperts": 2, "topK": 1}
    rng = np.random.default_rng(0)
    evl = build_evl0(cfg, {n: rng.standard_normal(sh).astype(np.float32) for n, sh in evl_shapes(5, 4, 1, 3, 6, 2)})
    man = EvermindPackage.make_manifest(schema="evermind.model/1", name="f", version="1", modelType="evermind-lm",
                                        config=cfg, paramCount=1, checkpointFormat="EVL0", checkpointFp16=False,
                                        checksum=fnv1a32(evl), card={"description": "fuzz"})
    pkg = framing.frame(EvermindPackage(man, evl).to_blob())
    assert js_json(man)
    shutil.rmtree(d)
    return {"checkpoint": ck, "package": pkg}


def mutate(buf: bytearray, r: random.Random) -> bytearray:
    k = r.randrange(6)
    pos = r.randrange(len(buf)) if buf else 0
    if k == 0:
        del buf[pos:]
    elif k == 1:
        for _ in range(r.randint(1, 8)):
            if buf:
                buf[r.randrange(len(buf))] ^= 1 << r.randrange(8)
    elif k == 2 and len(buf) >= 8:
        off = r.choice([0, 4, 8, 12, 16, 20, 24, 28, 32][: max(1, len(buf) // 4 - 1)])
        buf[off:off + 4] = struct.pack("<I", r.choice([0xFFFFFFFF, 0x7FFFFFFF, 1 << 20, len(buf) + r.randint(1, 9)]))
    elif k == 3:
        i = buf.find(b"{")
        if i >= 0:
            buf[i:i + r.randint(1, 4)] = r.choice([b"[", b"}", b"\xff\xfe", b'{"a":' * 200, b"1e999", b"NaN",
                                                   b"[" * 5000])
    elif k == 4:
        buf[pos:pos] = bytes(r.randrange(256) for _ in range(r.randint(1, 32)))
    else:
        j = r.randrange(len(buf)) if buf else 0
        buf[pos:pos] = buf[j:j + r.randint(1, 64)]
    return buf


# -- bombs ------------------------------------------------------------------------------------------------
def zstd_zeros(prefix: bytes, zeros: int) -> bytes:
    cobj = zstandard.ZstdCompressor(level=1, write_content_size=True, write_checksum=True).compressobj(
        size=len(prefix) + zeros)
    out, chunk = [cobj.compress(prefix)], bytes(1 << 20)
    for _ in range(zeros >> 20):
        out.append(cobj.compress(chunk))
    return b"".join(out + [cobj.flush()])


def bombs():
    out = []
    for n in (64 << 20, 256 << 20, 1 << 30):
        rec = json.dumps({"metadata": {}, "w": {"__ndarray__": {"dtype": "uint8", "shape": [n], "offset": 0,
                                                                "nbytes": n, "sha256": "0" * 64}}}).encode()
        out.append(("checkpoint", zstd_zeros(EVCK + struct.pack("<IQQ", 1, len(rec), n) + rec, n)))
        man = js_json({"schema": "evermind.model/1", "modelType": "evermind-transformer-lm", "config": LM}).encode()
        out.append(("package", zstd_zeros(struct.pack("<3I", 0x45564D31, 1, len(man)) + man, n)))
    return out


def bomb_input(templates, r: random.Random):
    kind, blob = r.choice(templates)
    buf = bytearray(blob)
    roll = r.random()
    if roll < 0.3:  # lie about the content size (single-segment frames keep it at bytes 5..13)
        fhd = buf[4]
        size_bytes = {0: 1 if fhd & 0x20 else 0, 1: 2, 2: 4, 3: 8}[fhd >> 6]
        if size_bytes:
            start = 5 + (0 if fhd & 0x20 else 1)
            v = r.choice([1, 1000, 1 << 24, (1 << (8 * size_bytes)) - 1])
            buf[start:start + size_bytes] = (v & ((1 << (8 * size_bytes)) - 1)).to_bytes(size_bytes, "little")
    elif roll < 0.5:
        buf = mutate(buf, r)
    return kind, bytes(buf)


# -- tiny files declaring huge models ----------------------------------------------------------------------
def huge_lm(r: random.Random) -> dict:
    big = lambda: r.choice([1 << 10, 1 << 14, 1 << 20, 1 << 24, 1 << 31, r.randint(1, 1 << 16)])  # noqa: E731
    heads = r.choice([1, 2, 4, 64])
    return dict(LM, vocab_size=big(), d_model=heads * 2 * r.choice([1, 64, 1 << 12]), n_layers=r.choice([1, 8, 1 << 20]),
                n_heads=heads, n_kv_heads=heads, d_ff=big(), tie_embeddings=r.random() < 0.5)


def tiny_evt0(r: random.Random) -> bytes:
    evt = struct.pack("<3I", EVT0, 1, 1) + struct.pack("<I", 12) + b"embed.weight" + struct.pack("<3I", 2, 1, 1)
    evt += bytes(4)
    return evt + struct.pack("<II", CRC_MAGIC, crc32(evt))


def tiny_input(r: random.Random, d: str):
    """(loader name, callable) for one tiny hostile file or layout."""
    k = r.randrange(7)
    cfg = huge_lm(r)
    if k == 0:
        evt = tiny_evt0(r)
        man = EvermindPackage.make_manifest(schema="evermind.model/1", name="t", version="1",
                                            modelType="evermind-transformer-lm", config=cfg, paramCount=1,
                                            checkpointFormat="EVT0", checkpointFp16=False, checksum=fnv1a32(evt),
                                            card={})
        p = os.path.join(d, "t.evermind")
        EvermindPackage(man, evt).to_file(p)
        return "tiny package", lambda: load_model_file(p)
    if k == 1:
        p = os.path.join(d, "t.npz")
        np.savez(p, __config__=np.frombuffer(json.dumps(cfg).encode(), np.uint8),
                 **{"embed.weight": np.zeros((1, 1), np.float32)})
        return "tiny npz", lambda: load_model_file(p)
    if k == 2:
        from safetensors.numpy import save
        p = os.path.join(d, "t.safetensors")
        with open(p, "wb") as f:
            f.write(save({"embed.weight": np.zeros((1, 1), np.float32)}, metadata={"evermind_config": json.dumps(cfg)}))
        return "tiny safetensors", lambda: load_model_file(p)
    big = lambda: r.choice([1, 2, 1 << 12, 1 << 24, 0xFFFFFFFF])  # noqa: E731
    tail = bytes(r.randrange(0, 300))
    if k == 3:
        return "tiny MoE0", lambda: parse_moe0(struct.pack("<6I", MOE0, r.choice([1, 2]), big(), big(), big(), 1) + tail)
    if k == 4:
        return "tiny EVL0", lambda: parse_evl0(struct.pack("<9I", EVL0, 1, big(), big(), big(), big(), big(), big(), 1)
                                               + tail, require_crc=r.random() < 0.5)
    if k == 5:
        return "tiny VRQ0", lambda: parse_vrq0(struct.pack("<9I", VRQ0, *(big() for _ in range(8))) + tail)
    body = struct.pack("<3I", EVT0, 1, big()) + struct.pack("<I", 1) + b"a" + struct.pack("<3I", 2, big(), big()) + tail
    return "tiny EVT0", lambda: parse_evt0(body + struct.pack("<II", CRC_MAGIC, crc32(body)))


def zipbombs(n: int = 1 << 30) -> list:
    """npz files (bytes) holding a config, maybe a real tensor, and one deflated member declaring n bytes
    under a name the loader may expect or not; built once (deflating 1 GiB takes seconds)."""
    out = []
    for name in ("extra.npy", "embed.weight.npy", "norm.weight.npy"):
        b = io.BytesIO()
        with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("__config__.npy", _npy(np.frombuffer(json.dumps(LM).encode(), np.uint8)))
            if name == "extra.npy":
                zf.writestr("embed.weight.npy", _npy(np.zeros((16, 8), np.float32)))
            with zf.open(name, "w", force_zip64=True) as f:
                np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (n // 4,)})
                chunk = bytes(1 << 20)
                for _ in range(n >> 20):
                    f.write(chunk)
        out.append(b.getvalue())
    return out


def zipbomb_input(r: random.Random, d: str, templates: list):
    buf = bytearray(r.choice(templates))
    if r.random() < 0.3:
        buf = mutate(buf, r)
    p = os.path.join(d, "z.npz")
    with open(p, "wb") as f:
        f.write(buf)
    return "zip bomb npz", lambda: load_model_file(p)


def _npy(a) -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array(b, a)
    return b.getvalue()


# -- special files ------------------------------------------------------------------------------------------
def special_paths(d: str) -> list:
    """Paths that are not regular files after resolving links (built once in d)."""
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    os.mkdir(os.path.join(d, "dir"))
    out = ["/dev/zero", "/dev/urandom", fifo, os.path.join(d, "dir")]
    for target in ("/dev/zero", fifo, os.path.join(d, "dir")):
        for suffix in (".evermind", ".safetensors", ".npz", ".json", ".vrq0"):
            link = os.path.join(d, f"l{len(out)}{suffix}")
            os.symlink(target, link)
            out.append(link)
    return out


SPECIAL_LOADERS = {"open_blob": open_blob, "package": EvermindPackage.from_file, "model": load_model_file,
                   "checkpoint": lambda p: load_checkpoint(p if "/" in p else "./" + p), "codec": load_codec,
                   "tokens": load_token_list}


def special_input(r: random.Random, paths: list):
    path, name = r.choice(paths), r.choice(sorted(SPECIAL_LOADERS))

    def run():
        try:
            SPECIAL_LOADERS[name](path)
        except NotRegularFileError as e:
            if e.filename != path:
                raise AssertionError(f"NotRegularFileError names {e.filename!r}, not {path!r}") from e
            raise
        raise AssertionError(f"{path} was not refused")
    return f"special {name}", run


# -- parsed-structure bombs in every format's JSON ------------------------------------------------------------
def json_payloads() -> list:
    """(name, JSON bytes for the 'x' member of a document): bombs past each limit, and documents just
    within them (which must load)."""
    return [("deep", b"[" * 100_000 + b"]" * 100_000), ("deep65", b"[" * 65 + b"]" * 65),
            ("ok depth 60", b"[" * 60 + b"]" * 60),
            ("many lists", b"[" + b",".join([b"[]"] * 600_000) + b"]"),
            ("many numbers", b"[" + b",".join([b"1"] * 3_000_000) + b"]"),
            ("ok 200k values", b"[" + b",".join([b"1"] * 200_000) + b"]"),
            ("long string", b'"' + b"a" * (5 << 20) + b'"'), ("ok escaped string", b'"' + b"\\" * (3 << 20) + b'"'),
            ("escaped string", b'"' + b"\\" * (9 << 20) + b'"'),
            ("ok 1 MB string", b'"' + b"a" * (1 << 20) + b'"'), ("nan", b"[NaN]"), ("infinity", b"[1, -Infinity]")]


def _doc(x: bytes) -> bytes:
    return b'{"metadata":{},"x":' + x + b"}"


def jsonbomb_input(r: random.Random, d: str, payloads: list):
    name, x = r.choice(payloads)
    where = r.choice(["framed checkpoint", "doppler checkpoint", "manifest", "safetensors header",
                      "safetensors config", "npz config", "token list"])
    p = os.path.join(d, "j")
    if where == "framed checkpoint":
        js = _doc(x)
        blob, p = framing.frame(EVCK + struct.pack("<IQQ", 1, len(js), 0) + js, level=1), p + ".json"
        fn = lambda: load_checkpoint(p)  # noqa: E731
    elif where == "doppler checkpoint":
        blob, p = _doc(x), p + ".json"
        fn = lambda: load_checkpoint(p)  # noqa: E731
    elif where == "manifest":
        m = b'{"schema":"evermind.model/1","x":' + x + b"}"
        blob = framing.frame(struct.pack("<3I", 0x45564D31, 1, len(m)) + m, level=1)
        fn = lambda: EvermindPackage.from_file(p)  # noqa: E731
    elif where == "safetensors header":
        h = b'{"__metadata__":{"a":"b"},"x":' + x + b"}"
        blob, p = struct.pack("<Q", len(h)) + h, p + ".safetensors"
        fn = lambda: load_model_file(p)  # noqa: E731
    elif where == "safetensors config":
        from safetensors.numpy import save
        blob = save({"embed.weight": np.zeros((1, 1), np.float32)},
                    metadata={"evermind_config": _doc(x).decode("latin-1")})
        p += ".safetensors"
        fn = lambda: load_model_file(p)  # noqa: E731
    elif where == "npz config":
        b = io.BytesIO()
        np.savez(b, __config__=np.frombuffer(_doc(x), np.uint8), **{"embed.weight": np.zeros((1, 1), np.float32)})
        blob, p = b.getvalue(), p + ".npz"
        fn = lambda: load_model_file(p)  # noqa: E731
    else:
        blob = x
        fn = lambda: load_token_list(p)  # noqa: E731
    with open(p, "wb") as f:
        f.write(blob)
    return f"jsonbomb {where} {name}", fn


# -- poisoned weights -------------------------------------------------------------------------------------------
def poisoned_models(d: str) -> list:
    """Paths of a package, an npz and a safetensors file of one small TransformerLM with NaN/Inf weights
    (written with allow_nonfinite=True)."""
    from evermind_vk.models import LMConfig, TransformerLM
    m = TransformerLM(LMConfig(**{k: v for k, v in LM.items()}))
    sd = m.state_dict()
    sd["embed.weight"][0, 0], sd["norm.weight"][1] = np.nan, np.inf
    m.load_state_dict(sd)
    out = [os.path.join(d, n) for n in ("p.evermind", "p.npz", "p.safetensors")]
    EvermindPackage.from_model(m, "p", allow_nonfinite=True).to_file(out[0])
    save_model(m, out[1], allow_nonfinite=True)
    export_safetensors(m, out[2], allow_nonfinite=True)
    return out


def poison_input(r: random.Random, d: str, models: list):
    if r.random() < 0.5:
        p = r.choice(models)

        def run():
            try:
                load_model_file(p)
            except NonFiniteError as e:
                if "embed.weight (1 NaN/Inf)" not in str(e):
                    raise AssertionError(f"the error does not name the tensor and count: {e}") from e
                raise
            raise AssertionError(f"{p}: a poisoned model loaded")
        return f"poison load {os.path.splitext(p)[1]}", run
    w = np.ones(r.randint(1, 3 << 20), np.float32)
    w[r.randrange(w.size)] = r.choice([np.nan, np.inf, -np.inf])

    def save():
        try:
            save_checkpoint("poison", {"w": w}, directory=d)
        except NonFiniteError:
            if os.path.exists(os.path.join(d, "poison.json")):
                raise AssertionError("a refused poisoned checkpoint was written")
            raise
        raise AssertionError("a poisoned checkpoint was saved")
    return "poison save checkpoint", save


# -- the store under attack --------------------------------------------------------------------------------
SAVER = """
import sys, numpy as np
from evermind_vk.io.checkpoint import save_checkpoint
out = []
for i in range(int(sys.argv[3])):
    out.append(save_checkpoint("race", {"i": i, "w": np.full(32, i, np.float32)}, directory=sys.argv[1])["metadata"]["lineage"]["sequence"])
print(" ".join(map(str, out)))
"""


def race_threads(d: str, n: int = 10) -> str:
    seqs, errs = [], []

    def saver():
        try:
            for i in range(n):
                seqs.append(save_checkpoint("race", {"i": i, "w": np.full(32, i, np.float32)},
                                            directory=d)["metadata"]["lineage"]["sequence"])
        except Exception as e:  # noqa: BLE001 - reported as an unexpected outcome
            errs.append(e)
    ths = [threading.Thread(target=saver) for _ in range(2)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    rec = load_checkpoint("race", directory=d)
    if errs or sorted(seqs) != list(range(1, 2 * n + 1)) or rec["metadata"]["lineage"]["sequence"] != 2 * n:
        return f"UNEXPECTED thread race: errors {errs[:1]}, sequences {sorted(seqs)[:5]}..."
    return "ok"


def race_processes(d: str, n: int = 25) -> str:
    ps = [subprocess.Popen([sys.executable, "-c", SAVER, d, "x", str(n)], stdout=subprocess.PIPE, text=True)
          for _ in range(2)]
    seqs = [int(x) for p in ps for x in p.communicate(timeout=300)[0].split()]
    rec = load_checkpoint("race", directory=d)
    if sorted(seqs) != list(range(1, 2 * n + 1)) or rec["metadata"]["lineage"]["sequence"] != 2 * n:
        return f"UNEXPECTED process race: sequences {sorted(seqs)[:5]}... final {rec['metadata']['lineage']}"
    return "ok"


def symlink_attack(d: str, r: random.Random) -> str:
    victim = os.path.join(d, "victim")
    with open(victim, "wb") as f:
        f.write(b"precious")
    target = os.path.join(d, "ck.json")
    where = r.choice(["old temp name", "forced temp collision", "lock file"])
    planted = {"old temp name": os.path.join(d, f".ck.json.tmp{os.getpid()}"),
               "forced temp collision": os.path.join(d, ".ck.json.collide.tmp"),
               "lock file": os.path.join(d, ".ck.json.lock")}[where]
    if os.path.lexists(planted):
        os.unlink(planted)
    os.symlink(victim, planted)
    real = atomic.secrets.token_hex
    names = iter(["collide", "fresh1", "fresh2"])
    if where == "forced temp collision":
        atomic.secrets.token_hex = lambda n: next(names)
    outcome = "saved"
    try:
        save_checkpoint(target, {"v": r.random()})
    except OSError as e:
        outcome = "refused (OSError)" if where == "lock file" and "symlink" in str(e) else f"UNEXPECTED {e!r}"
    finally:
        atomic.secrets.token_hex = real
        os.unlink(planted)
    with open(victim, "rb") as f:
        if f.read() != b"precious":
            return f"UNEXPECTED: the write through the {where} reached the victim"
    return f"{where}: {outcome}"


def one_input(cls, r, base, inner, templates, zmember, specials, payloads, poisoned, work):
    """(label, run) for one input of attack class cls: run() loads it (raising what the loader raises)."""
    if cls == "mutate":
        kind = r.choice(["checkpoint", "package"])
        at_frame = r.random() < 0.3
        buf = mutate(bytearray(base[kind] if at_frame else inner[kind]), r)
        if r.random() < 0.3:
            buf = mutate(buf, r)
        blob = bytes(buf) if at_frame else framing.frame(bytes(buf), level=1)

        def run():
            if kind == "checkpoint":
                _, stored = decode(blob)
                verify(stored)
            else:
                p = EvermindPackage.from_blob(framing.unframe(blob))
                if p.validate()["ok"]:
                    parse_evl0(p.checkpoint, require_crc=False)
        return kind, run
    if cls == "bomb":
        kind, blob = bomb_input(templates, r)
        path = os.path.join(work, "bomb")
        with open(path, "wb") as f:
            f.write(blob)

        def run():
            got = open_blob(path)
            if got.kind == "package":
                got.package.validate()
        return f"bomb {kind}", run
    if cls == "tiny":
        return tiny_input(r, work)
    if cls == "zipbomb":
        return zipbomb_input(r, work, zmember)
    if cls == "special":
        return special_input(r, specials)
    if cls == "jsonbomb":
        return jsonbomb_input(r, work, payloads)
    return poison_input(r, work, poisoned)


def main(n=100000, seed=0):
    r = random.Random(seed)
    base = seeds()
    inner = {k: framing.unframe(v) for k, v in base.items()}
    print("building bombs ...", flush=True)
    templates = bombs()
    zmember = zipbombs()
    print(f"bombs: {[len(b) for _, b in templates]} bytes; zip bombs {[len(z) for z in zmember]} bytes", flush=True)
    work = tempfile.mkdtemp()
    specials = special_paths(tempfile.mkdtemp(dir=work))
    payloads = json_payloads()
    poisoned = poisoned_models(tempfile.mkdtemp(dir=work))
    counts = collections.Counter()
    worst, worst_case = 0, ""
    worst_rss, worst_rss_case, peak_hwm = 0.0, "", 0.0
    per_case = reset_peak_rss()  # measure each input's own peak RSS growth (else only the process's peak)
    rss0 = rss_mb()
    t0 = time.time()
    tracemalloc.start()
    for i in range(n):
        if i % 2000 == 1999:
            d = tempfile.mkdtemp(dir=work)
            counts[f"race: threads {race_threads(d)}"] += 1
            shutil.rmtree(d)
            if i % 10000 == 9999:
                d = tempfile.mkdtemp(dir=work)
                counts[f"race: processes {race_processes(d)}"] += 1
                shutil.rmtree(d)
        if i % 500 == 250:
            d = tempfile.mkdtemp(dir=work)
            counts[f"symlink: {symlink_attack(d, r)}"] += 1
            shutil.rmtree(d)
        cls = r.choices(["mutate", "bomb", "tiny", "zipbomb", "special", "jsonbomb", "poison"],
                        [55, 8, 14, 2, 8, 8, 5])[0]
        label, run = one_input(cls, r, base, inner, templates, zmember, specials, payloads, poisoned, work)
        tracemalloc.reset_peak()  # the loader's memory, not the input's construction
        if per_case:
            before = _status_mb("VmRSS:")
            reset_peak_rss()
        try:
            run()
            counts[f"{label}: loaded"] += 1
        except (BlobError, ShapeError, TokenError, NotRegularFileError) as e:
            counts[f"{label}: {type(e).__name__}"] += 1
        except UnsupportedError as e:  # valid JSON that is not a model config at all
            counts[f"{label}: {'' if label.startswith('jsonbomb npz config') else 'UNEXPECTED '}"
                   f"{type(e).__name__}"] += 1
        except Exception as e:  # noqa: BLE001 - the point: anything else is a bug
            counts[f"{label}: UNEXPECTED {type(e).__name__}: {e}"[:160]] += 1
        peak = tracemalloc.get_traced_memory()[1]
        if peak > worst:
            worst, worst_case = peak, label
        if per_case:
            hwm = _status_mb("VmHWM:")
            peak_hwm = max(peak_hwm, hwm)
            if hwm - before > worst_rss:
                worst_rss, worst_rss_case = hwm - before, label
    dt = time.time() - t0
    tracemalloc.stop()
    shutil.rmtree(work, ignore_errors=True)
    for k, v in sorted(counts.items()):
        print(f"{v:8d}  {k}")
    bad = sum(v for k, v in counts.items() if "UNEXPECTED" in k)
    grown = worst_rss if per_case else rss_mb() - rss0
    print(f"{n} inputs in {dt:.0f}s; unexpected outcomes: {bad}; peak traced memory {worst / 2**20:.1f} MiB "
          f"({worst_case}); " + (f"peak RSS growth of one input {worst_rss:.1f} MiB ({worst_rss_case}), peak RSS "
                                 f"during the inputs {peak_hwm:.0f} MiB (setup's peak {rss0:.0f} MiB)" if per_case else
                                 f"peak RSS {rss_mb():.0f} MiB, {grown:.1f} MiB over the baseline after setup"))
    return 1 if bad or worst > LIMIT or grown > 64 else 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:])))
