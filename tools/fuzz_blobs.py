#!/usr/bin/env python3
"""Long hostile-input fuzz of the blob readers (run outside CI):
    python tools/fuzz_blobs.py [N=100000] [seed=0]
Mutates valid checkpoints and .evermind packages (truncate, bit flips, grown length fields, corrupted
JSON, inserted bytes, random splices), at the frame and inside it, and feeds each to the readers.
Every input must load or raise a BlobError; anything else, or a peak of more than 64 MiB, is a failure.
Prints counts per outcome."""
import collections
import random
import struct
import sys
import tempfile
import time
import tracemalloc

import numpy as np

from evermind_vk.io import framing
from evermind_vk.io.checkpoint import decode, save_checkpoint, verify
from evermind_vk.errors import BlobError
from evermind_vk.io.jsjson import js_json
from evermind_vk.io.layouts import build_evl0, evl_shapes, parse_evl0
from evermind_vk.io.package import EvermindPackage, fnv1a32


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
            buf[i:i + r.randint(1, 4)] = r.choice([b"[", b"}", b"\xff\xfe", b'{"a":' * 200, b"1e999", b"NaN"])
    elif k == 4:
        buf[pos:pos] = bytes(r.randrange(256) for _ in range(r.randint(1, 32)))
    else:
        j = r.randrange(len(buf)) if buf else 0
        buf[pos:pos] = buf[j:j + r.randint(1, 64)]
    return buf


def main(n=100000, seed=0):
    r = random.Random(seed)
    base = seeds()
    inner = {k: framing.unframe(v) for k, v in base.items()}
    counts = collections.Counter()
    worst = 0
    t0 = time.time()
    tracemalloc.start()
    for i in range(n):
        kind = r.choice(["checkpoint", "package"])
        at_frame = r.random() < 0.3
        buf = mutate(bytearray(base[kind] if at_frame else inner[kind]), r)
        if r.random() < 0.3:
            buf = mutate(buf, r)
        blob = bytes(buf) if at_frame else framing.frame(bytes(buf), level=1)
        tracemalloc.reset_peak()
        try:
            if kind == "checkpoint":
                _, stored = decode(blob)
                verify(stored)
            else:
                p = EvermindPackage.from_blob(framing.unframe(blob))
                if p.validate()["ok"]:
                    parse_evl0(p.checkpoint, require_crc=False)
            counts[f"{kind}: loaded"] += 1
        except BlobError as e:
            counts[f"{kind}: {type(e).__name__}"] += 1
        except Exception as e:  # noqa: BLE001 - the point: anything else is a bug
            counts[f"{kind}: UNEXPECTED {type(e).__name__}: {e}"[:160]] += 1
        worst = max(worst, tracemalloc.get_traced_memory()[1])
    dt = time.time() - t0
    for k, v in sorted(counts.items()):
        print(f"{v:8d}  {k}")
    bad = sum(v for k, v in counts.items() if "UNEXPECTED" in k)
    print(f"{n} inputs in {dt:.0f}s; unexpected exceptions: {bad}; peak traced memory {worst / 2**20:.1f} MiB")
    return 1 if bad or worst > 64 << 20 else 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:])))
