"""Data-parallel training (issue 16) on lavapipe: N ranks with per-rank batch B equal one process with
batch N·B; every rank holds the same weights after every step; ZeRO-1 shards the AdamW moments and
changes nothing else; checkpoints resume with another N; a SIGKILLed rank makes the others fail with
DistributedError within the timeout, and the run resumes from the last checkpoint; the --nproc
launcher stops the rest and says so in one line.

Ranks are separate processes (subprocess, a free port, torchrun's variables), as in real use."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("torch")

from evermind_vk.errors import ConfigError  # noqa: E402
from evermind_vk.io.checkpoint import load_checkpoint  # noqa: E402
from evermind_vk.models import HybridMambaConfig, HybridMambaModel, LMConfig, TransformerLM  # noqa: E402
from evermind_vk.train import GradScaler, Trainer  # noqa: E402
from evermind_vk.train.distributed import World, free_port  # noqa: E402

TINY = LMConfig(vocab_size=13, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)
IDS = np.random.default_rng(0).integers(0, 13, 60)  # 59 pairs: 15 chunks of 4 (the last 3) at seq_len 4
KW = dict(seq_len=4, lr=0.05, epochs=2)
# f32 sums in another order (per-rank partial gradients, then the all-reduce): AdamW normalises
# the gradient, so a weight moves by up to ~lr per step whatever its size; the differences stay tiny.
TOL = dict(rtol=1e-4, atol=1e-5)
# f16 activations: two ranks' half batches and one big batch round differently (2^-11 per f16 value), and
# over 8 AdamW steps at lr 0.05 such differences move a weight whose gradient is near zero further than in
# f32 (on the H200 one element of 128 differed by 2.5e-4, 1% relative; on lavapipe all were within 1e-3)
F16_TOL = dict(rtol=1e-2, atol=5e-4)

WORKER = r"""
import json, os, signal, sys
import numpy as np
from evermind_vk.errors import DistributedError
from evermind_vk.models import HybridMambaConfig, HybridMambaModel, LMConfig, TransformerLM
from evermind_vk.train import GradScaler, Trainer
from evermind_vk.train.distributed import World
a = json.loads(sys.argv[1])
mp = dict(precision=a.get("precision", "f32"), scaler=GradScaler(**a["scaler"]) if a.get("scaler") else None)
cfg = LMConfig(**a["cfg"])
make = (lambda: HybridMambaModel(HybridMambaConfig(**a["mamba"]))) if a.get("mamba") else (lambda: TransformerLM(cfg))
data = np.asarray(a["ids"])
if a.get("moe"):  # a model of other data: (input, target) rows
    from evermind_vk.models import MoEConfig, SharedExpertMoE
    make, data = (lambda: SharedExpertMoE(MoEConfig(**a["moe"]))), tuple(np.asarray(v, np.float32) for v in a["rows"])
    mp["loss_options"] = {"aux_weight": 0.0}
world = World.from_env()
rank = world.rank
try:
    if a.get("resume"):
        tr = Trainer.from_checkpoint(a["key"], directory=a["dir"], world=world, zero=a.get("zero", False))
    else:
        tr = Trainer(make(), world=world, zero=a.get("zero", False), **mp)
    if a.get("bucket_bytes"):
        tr._dp.bucket_bytes = a["bucket_bytes"]
    hashes = []
    def on_step(step, m):
        if a.get("kill") == [rank, step]:
            os.kill(os.getpid(), signal.SIGKILL)
        if a.get("stall") == [rank, step]:  # alive but silent: the peers must give up after the timeout
            os.kill(os.getpid(), signal.SIGSTOP)
        hashes.append(tr._dp.check_identical())
        if str(step) in a.get("scale_at", {}):  # a scale at which the next step's f16 gradients overflow
            tr.scaler.scale = a["scale_at"][str(step)]
    tr.train(data, batch_size=a["B"], on_step=on_step, max_steps=a.get("max_steps"),
             save_key=a.get("key"), save_dir=a.get("dir", "."), save_every=a.get("save_every", 0), **a["kw"])
except DistributedError as e:
    print(f"DistributedError: {e}", file=sys.stderr, flush=True)
    sys.exit(3)
ppl = tr.evaluate(data, seq_len=a["kw"]["seq_len"], batch_size=a["B"]) if a.get("eval") else None
np.savez(os.path.join(a["out"], f"rank{rank}.npz"), **tr.model.state_dict())
with open(os.path.join(a["out"], f"rank{rank}.json"), "w") as f:
    json.dump({"losses": [h["loss"] for h in tr.history], "checked": len(hashes), "step": tr.global_step,
               "opt_bytes": tr._dp.optimizer_state_bytes(), "timing": tr._dp.timing,
               "buckets": len(tr._dp.buckets(tr.trainable(wsla=a["kw"].get("wsla", False)))), "ppl": ppl,
               "eval_tokens": getattr(tr, "last_eval_tokens", None),
               "scaler": [[h.get("loss_scale"), h.get("overflow")] for h in tr.history]}, f)
"""


def ranks(n, tmp_path, timeout_s=20, **args):
    """Run WORKER as n ranks; returns ([returncode], [stderr], [info per rank or None], [weights or None])."""
    out = tmp_path / f"out{time.monotonic_ns()}"
    out.mkdir()
    args = {"cfg": TINY.to_dict(), "ids": IDS.tolist(), "kw": KW, "out": str(out), **args}
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   EVERMIND_VK_DIST_TIMEOUT=str(timeout_s))
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(args)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    codes, errs = [None] * n, [None] * n
    stalled = (args.get("stall") or [None])[0]
    try:
        for r in sorted(range(n), key=lambda r: r == stalled):  # a stalled rank last, killed then
            if r == stalled:
                procs[r].kill()
            _, errs[r] = procs[r].communicate(timeout=240)
            codes[r] = procs[r].returncode
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    infos = [json.loads((out / f"rank{r}.json").read_text()) if (out / f"rank{r}.json").exists() else None
             for r in range(n)]
    weights = [dict(np.load(out / f"rank{r}.npz")) if (out / f"rank{r}.npz").exists() else None for r in range(n)]
    return codes, errs, infos, weights


def single(batch_size, **kw):
    tr = Trainer(TransformerLM(TINY))
    tr.train(IDS, batch_size=batch_size, **{**KW, **kw})
    return tr


def close(a, b):
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], **TOL, err_msg=k)


def test_world_from_env_reads_torchrun_variables():
    env = {"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.2", "MASTER_PORT": "29501", "LOCAL_RANK": "0",
           "EVERMIND_VK_DIST_TIMEOUT": "7.5"}
    w = World.from_env(env)
    assert (w.rank, w.size, w.master_addr, w.master_port, w.local_rank, w.timeout) == (1, 3, "10.0.0.2", 29501, 0, 7.5)
    for missing in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        with pytest.raises(ConfigError, match=missing):
            World.from_env({k: v for k, v in env.items() if k != missing})
    with pytest.raises(ConfigError, match="rank 3 of world size 3"):
        World.from_env({**env, "RANK": "3"})
    with pytest.raises(ConfigError, match="needs a world"):
        Trainer(TransformerLM(TINY), zero=True)


@pytest.mark.parametrize("n, b, accum, bucket", [(2, 2, 1, 300), (3, 2, 2, None)])
def test_ranks_equal_one_big_batch_and_stay_identical(device, tmp_path, n, b, accum, bucket):
    # N=3, B=2: the last global batch has 3 rows, so rank 1 gets one real row and rank 2 none; with
    # accum_steps=2 each step is two global micro-batches. N=2: 300-byte buckets, many all-reduces.
    codes, errs, infos, weights = ranks(n, tmp_path, B=b, kw={**KW, "accum_steps": accum}, bucket_bytes=bucket,
                                        eval=True)
    assert codes == [0] * n, errs
    assert infos[0]["buckets"] > 3 if bucket else infos[0]["buckets"] == 1
    ref = single(n * b, accum_steps=accum)
    steps = len(ref.history)
    assert all(i["checked"] == steps and i["step"] == steps for i in infos)  # hashes compared after every step
    for w in weights[1:]:
        assert all(np.array_equal(weights[0][k], w[k]) for k in w)  # bit-identical replicas
    close(weights[0], ref.model.state_dict())
    np.testing.assert_allclose(infos[0]["losses"], [h["loss"] for h in ref.history], rtol=1e-5)
    moved = max(float(np.abs(weights[0][k] - TransformerLM(TINY).state_dict()[k]).max()) for k in weights[0])
    assert moved > 0.05  # trained (a no-op would pass the comparisons)
    # evaluation is sharded: each rank runs its share of the batches, all return the one-process number
    ppl = ref.evaluate(IDS, seq_len=KW["seq_len"], batch_size=b)
    assert len({i["ppl"] for i in infos}) == 1
    np.testing.assert_allclose(infos[0]["ppl"], ppl, rtol=1e-4)
    shares = [i["eval_tokens"] for i in infos]
    assert sum(shares) == ref.last_eval_tokens == IDS.size - 1 and max(shares) < ref.last_eval_tokens


def test_f16_ranks_equal_one_big_batch_and_agree_on_the_loss_scale(device, tmp_path):
    # Mixed precision with data-parallel: the ranks all-reduce the scaled f32 gradients, so an inf or NaN
    # of any rank reaches every rank's overflow check, and all skip the step and back off together.
    sc = {"init_scale": 16, "growth_interval": 2}
    codes, errs, infos, weights = ranks(2, tmp_path, B=2, precision="f16", scaler=sc, scale_at={"2": 2.0 ** 60})
    assert codes == [0, 0], errs
    assert all(np.array_equal(weights[0][k], weights[1][k]) for k in weights[0])  # bit-identical replicas
    ref = Trainer(TransformerLM(TINY), precision="f16", scaler=GradScaler(**sc))

    def hook(step, _m):
        if step == 2:
            ref.scaler.scale = 2.0 ** 60

    ref.train(IDS, batch_size=4, on_step=hook, **KW)
    want = [[h["loss_scale"], h["overflow"]] for h in ref.history]
    assert infos[0]["scaler"] == infos[1]["scaler"] == want
    # 16, 16, then the injected 2^60 overflows and backs off (2^59 ... overflow too)
    assert want[:3] == [[16, False], [16, False], [2.0 ** 60, True]] and want[3] == [2.0 ** 59, True]
    np.testing.assert_allclose(infos[0]["losses"], [h["loss"] for h in ref.history], rtol=F16_TOL["rtol"])
    for k in weights[0]:
        np.testing.assert_allclose(weights[0][k], ref.model.state_dict()[k], **F16_TOL, err_msg=k)


def test_mamba_wsla_row_ranges_with_ranks(device, tmp_path):
    # WSLA on a mamba2 layer steps a row range of wInProj: 2 ranks equal one process with batch 2B
    mcfg = dict(vocabSize=13, dModel=8, numLayers=1, layers=["mamba2"], dState=3, nHeads=2, seed=2)
    kw = {**KW, "wsla": True, "lr": 1e-2}
    codes, errs, infos, weights = ranks(2, tmp_path, B=2, mamba=mcfg, kw=kw)
    assert codes == [0, 0], errs
    assert all(np.array_equal(weights[0][k], weights[1][k]) for k in weights[0])
    ref = Trainer(HybridMambaModel(HybridMambaConfig(**{**mcfg, "layers": ("mamba2",)})))
    before = ref.model.state_dict()
    ref.train(IDS, batch_size=4, **kw)
    assert {k for k in before if not np.array_equal(before[k], weights[0][k])} == {"layer0.wInProj"}
    close(weights[0], ref.model.state_dict())
    # ZeRO with a row range is refused (the owner's rows would not reach the other ranks' base tensors)
    codes, errs, _, _ = ranks(2, tmp_path, B=2, mamba=mcfg, kw=kw, zero=True)
    assert codes != [0, 0] and all("UnsupportedError" in e and "ZeRO" in e for e in errs)


def test_pair_model_ranks_equal_one_big_batch(device, tmp_path):
    # the one Trainer's data-parallel path for a model of (input, target) rows: 3 ranks x 2 rows equal one
    # process with 6 (the 14 rows leave a last global batch of 2: rank 2 gets none)
    from evermind_vk.models import MoEConfig, SharedExpertMoE
    mcfg = dict(model_dim=4, hidden_dim=6, num_experts=4, top_k=2, seed=1)
    x = np.sin(np.arange(56, dtype=np.float32)).reshape(14, 4)
    rows = [x.tolist(), np.cos(2 * x).tolist()]
    codes, errs, infos, weights = ranks(3, tmp_path, B=2, moe=mcfg, rows=rows, kw={**KW, "lr": 0.02}, eval=True)
    assert codes == [0, 0, 0], errs
    assert all(np.array_equal(weights[0][k], w[k]) for w in weights[1:] for k in w)
    ref = Trainer(SharedExpertMoE(MoEConfig(**mcfg)), loss_options={"aux_weight": 0.0})
    ref.train((x, np.cos(2 * x)), batch_size=6, **{**KW, "lr": 0.02})
    close(weights[0], ref.model.state_dict())
    np.testing.assert_allclose(infos[0]["losses"], [h["loss"] for h in ref.history], rtol=1e-5)
    np.testing.assert_allclose(infos[0]["ppl"], ref.evaluate((x, np.cos(2 * x)), batch_size=2), rtol=1e-5)


def test_zero_shards_the_moments_and_changes_nothing_else(device, tmp_path):
    codes, errs, infos, weights = ranks(2, tmp_path, B=2, zero=True)
    assert codes == [0, 0], errs
    c2, e2, full_infos, full = ranks(2, tmp_path, B=2)
    assert c2 == [0, 0], e2
    for k in full[0]:  # the same reduced gradients through the same AdamW kernel: bit-identical
        assert np.array_equal(weights[0][k], full[0][k]) and np.array_equal(weights[1][k], full[0][k]), k
    every = full_infos[0]["opt_bytes"]
    assert every == 2 * 4 * sum(p.numel for p in TransformerLM(TINY).parameters().values())
    shares = [i["opt_bytes"] for i in infos]
    assert sum(shares) == every and max(shares) < 0.75 * every  # balanced by numel, nothing kept twice


def test_resume_with_another_number_of_ranks(device, tmp_path):
    ck = tmp_path / "ck"
    # 2 ranks x 3 rows, ZeRO (the checkpoint gathers the moments on rank 0), stop after 2 steps ...
    codes, errs, _, _ = ranks(2, tmp_path, B=3, zero=True, key="run", dir=str(ck), max_steps=2)
    assert codes == [0, 0], errs
    assert load_checkpoint("run", directory=str(ck))["global_step"] == 2
    # ... then 3 ranks x 2 rows to the end: the same global batch of 6, so the same run.
    codes, errs, infos, weights = ranks(3, tmp_path, B=2, key="run", dir=str(ck), resume=True)
    assert codes == [0, 0, 0], errs
    ref = single(6)
    assert infos[0]["step"] == len(ref.history)
    close(weights[0], ref.model.state_dict())
    # and a single process resumes the data-parallel checkpoint too
    one = Trainer.from_checkpoint("run", directory=str(ck))
    assert one.global_step == len(ref.history)
    close(one.model.state_dict(), ref.model.state_dict())


def test_sigkill_of_a_rank_fails_the_others_and_the_run_resumes(device, tmp_path):
    ck = tmp_path / "ck"
    t0 = time.monotonic()
    codes, errs, _, _ = ranks(3, tmp_path, timeout_s=10, B=1, key="run", dir=str(ck), save_every=1, kill=[1, 3],
                              kw={**KW, "epochs": 1})
    elapsed = time.monotonic() - t0
    assert codes[1] == -signal.SIGKILL
    for r in (0, 2):
        assert codes[r] == 3 and "DistributedError: rank" in errs[r], errs[r]
    assert elapsed < 60  # no hang (start-up of 3 processes included)
    rec = load_checkpoint("run", directory=str(ck))  # intact (written atomically by rank 0)
    assert rec["global_step"] in (2, 3)
    codes, errs, infos, weights = ranks(3, tmp_path, B=1, key="run", dir=str(ck), resume=True, kw={**KW, "epochs": 1})
    assert codes == [0, 0, 0], errs
    ref = single(3, epochs=1)
    assert infos[0]["step"] == len(ref.history)
    close(weights[0], ref.model.state_dict())


def test_a_stalled_rank_fails_the_others_after_the_timeout(device, tmp_path):
    t0 = time.monotonic()
    codes, errs, _, _ = ranks(2, tmp_path, timeout_s=3, B=1, stall=[1, 2], kw={**KW, "epochs": 1})
    assert codes[0] == 3 and "DistributedError: rank 0/2" in errs[0] and "3s timeout" in errs[0], errs[0]
    assert time.monotonic() - t0 < 40


CLI_TINY = ["--seq-len", "8", "--batch-size", "1", "--d-model", "8", "--layers", "1", "--heads", "2",
            "--kv-heads", "1", "--d-ff", "8", "--time-limit", "0", "--sample-tokens", "2"]


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        return int(env.get(b"RANK", b"-1"))
    except OSError:
        return -1


def _run_until_checkpoint(cmd, env, key, after_step=0):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(key) and load_checkpoint(key)["global_step"] > after_step:
            return proc
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(proc.communicate()[1] or "no checkpoint in 120 s")


def test_cli_nproc_ctrl_c_kill_and_resume(device, tmp_path, two_ranks_env):
    if not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"):
        pytest.skip("needs /proc/PID/task/PID/children to find the ranks")
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 8)
    out = tmp_path / "run"
    key = str(out / "trainer-checkpoint")
    cmd = [sys.executable, "-m", "evermind_vk", "train", "--text", str(text), "--out", str(out), *CLI_TINY,
           "--nproc", "2"]
    env = dict(two_ranks_env, EVERMIND_VK_DIST_TIMEOUT="10")
    # Ctrl-C (SIGINT to the launcher): forwarded once to each rank, which agree on a step, save, exit 130
    proc = _run_until_checkpoint(cmd + ["--epochs", "100000", "--save-every", "1"], env, key)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted by signal 2" in stdout and "Traceback" not in stderr
    saved = load_checkpoint(key)["global_step"]
    # a rank SIGKILLed: the launcher stops the other and says so in one line
    proc = _run_until_checkpoint(cmd + ["--epochs", "100000", "--save-every", "1", "--resume"], env, key, saved)
    try:
        kids = _children(proc.pid)
        victim = [c for c in kids if _rank_of(c) == 1]
        assert len(victim) == 1, _children(proc.pid)
        os.kill(victim[0], signal.SIGKILL)
        t0 = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - t0 < 30
    assert proc.returncode == 2, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("evermind-vk: error: rank 1 of 2 was killed by SIGKILL") and "--resume" in last, stderr
    assert "Traceback" not in stderr
    for pid in kids:  # the launcher stopped and reaped every rank
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    step = load_checkpoint(key)["global_step"]
    assert step >= 1
    res = subprocess.run(cmd + ["--epochs", "100000", "--resume", "--max-steps", str(step + 2)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert "terminate called" not in (out / "rank1.log").read_text()  # rank 1 left the group before exit
    assert f"resuming {key} at step {step}" in res.stdout and "data-parallel: 2 ranks" in res.stdout
    assert load_checkpoint(key)["global_step"] == step + 2


def test_round_robin_over_gpus_not_lavapipe(monkeypatch):
    from types import SimpleNamespace as D
    from evermind_vk.train import distributed
    monkeypatch.setattr(distributed, "devices", lambda: [D(index=0, type="discrete_gpu"), D(index=1, type="cpu"),
                                                         D(index=2, type="discrete_gpu")])
    assert [distributed.round_robin_device(r) for r in range(4)] == [0, 2, 0, 2]
    monkeypatch.setattr(distributed, "devices", lambda: [D(index=0, type="cpu")])
    assert [distributed.round_robin_device(r) for r in range(2)] == [0, 0]
    monkeypatch.delenv("EVERMIND_VK_DEVICE", raising=False)
    assert World(1, 2).device() == 0
    monkeypatch.setenv("EVERMIND_VK_DEVICE", "nvidia")
    assert World(1, 2).device() == "nvidia"


EXIT_CHECK = r"""
import atexit, sys
import torch.distributed as dist
from evermind_vk.train.distributed import World
# atexit runs hooks last-in first-out: this one, registered before World.init, runs after the library's
atexit.register(lambda: print("group alive at exit:", dist.is_initialized(), flush=True))
w = World(0, 1, master_port=int(sys.argv[1]), timeout=20)
w.init()
out = [None]
dist.all_gather_object(out, "x")  # a finished collective whose work a gloo thread may still hold
assert out == ["x"]
if sys.argv[2] == "raise":
    raise SystemExit(5)
"""


@pytest.mark.parametrize("how, rc", [("return", 0), ("raise", 5)])
def test_process_group_destroyed_before_interpreter_exit(how, rc):
    # Exiting with the gloo group alive let a worker thread drop a work's tensors during Py_Finalize
    # (SIGABRT, "terminate called without an active exception"); World.init's atexit hook destroys it.
    res = subprocess.run([sys.executable, "-c", EXIT_CHECK, str(free_port()), how], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == rc, res.stderr
    assert "group alive at exit: False" in res.stdout, res.stdout + res.stderr
    assert "terminate called" not in res.stderr and "Traceback" not in res.stderr, res.stderr
