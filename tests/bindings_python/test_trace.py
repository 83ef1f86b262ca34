"""The flight recorder from Python: ProcessGroup.dump_trace, distc.dump_trace,
and distc-trace reading what they wrote."""
import json
import os
import subprocess
import sys

import numpy as np

import distc
from conftest import run_threads

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tools/distc-trace")


def test_dump_and_analyse(tmp_path):
    def body(pg):
        x = np.ones(8, dtype=np.float32)
        for _ in range(3):
            pg.all_reduce(x)
        pg.barrier()
        pg.dump_trace(tmp_path / ("rank%d.jsonl" % pg.rank()))
        return x

    out = run_threads(2, body)
    assert out[0].tolist() == [8.0] * 8  # three in-place sums of 2 ranks
    lines = [json.loads(ln) for ln in open(tmp_path / "rank0.jsonl")]
    assert lines[0]["type"] == "distc-trace" and lines[0]["version"] == 1
    ops = [ln for ln in lines if ln["type"] == "op"]
    assert [o["op"] for o in ops] == ["allreduce"] * 3 + ["barrier"]
    assert [o["seq"] for o in ops] == [1, 2, 3, 4]
    assert all(o["state"] == "completed" and o["dtype"] == "float32" and o["numel"] == 8 for o in ops[:3])
    r = subprocess.run([sys.executable, TOOL, "--json", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["files"] == 2 and "every rank's records agree" in report["groups"][0]["verdict"]


def test_dump_all(tmp_path):
    store = distc.HashStore()
    distc.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        distc.all_reduce(np.zeros(4, dtype=np.float32))
        distc.dump_trace(tmp_path)
    finally:
        distc.destroy_process_group()
    files = [f for f in os.listdir(tmp_path) if f.endswith(".jsonl")]
    assert len(files) == 1 and files[0].startswith("distc-trace-rank0-")
    try:
        distc.dump_trace(tmp_path / "missing" / "dir")
    except distc.DistcError as e:
        assert "cannot write" in str(e)
    else:
        raise AssertionError("dump_trace into a missing directory did not fail")


def _write_trace(path, rank, ops, now=2_000_000):
    """A rank's trace file as the recorder writes it: header, group, ops."""
    lines = [{"type": "distc-trace", "version": 1, "host": "h", "pid": 100 + rank, "rank": rank, "time_us": now,
              "groups": 1},
             {"type": "group", "group": "g", "rank": rank, "size": 3, "global_rank": rank, "backend": "mpi",
              "ranks": [0, 1, 2], "capacity": 1000, "recorded": len(ops)}]
    for seq, state in ops:
        lines.append({"type": "op", "group": "g", "rank": rank, "id": seq, "seq": seq, "op": "allreduce",
                      "dtype": "float32", "numel": 16, "reduce": "SUM", "blocking": True, "thread": 100 + rank,
                      "state": state, "queued_us": 1_000_000 + seq, "duration_us": 5 if state == "completed" else 0})
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(ln) for ln in lines) + "\n")


def test_analyse_with_a_rank_that_left_no_trace(tmp_path):
    # Rank 1 skipped #3; rank 2 waits in it; rank 0 was killed before it
    # could write (as when the job ends on the other's watchdog). The rank
    # that never called is still named, at #3, not the first operation.
    _write_trace(tmp_path / "r1.jsonl", 1, [(1, "completed"), (2, "completed")])
    _write_trace(tmp_path / "r2.jsonl", 2, [(1, "completed"), (2, "completed"), (3, "started")])
    r = subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "rank 1 never called allreduce #3 of group g" in r.stdout, r.stdout
    assert "rank 0 left no trace" in r.stdout, r.stdout
    # Where the ranks that wrote agree on everything, the missing one is named alone.
    _write_trace(tmp_path / "r1.jsonl", 1, [(1, "completed"), (2, "completed"), (3, "completed")])
    _write_trace(tmp_path / "r2.jsonl", 2, [(1, "completed"), (2, "completed"), (3, "completed")])
    r = subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)
    assert "rank 0 left no trace" in r.stdout and "never called" not in r.stdout, r.stdout


def test_files_that_are_not_traces_are_named(tmp_path):
    # Each once gave a traceback (exit 1, which also means "diverges"): now a
    # message naming the file and line, and exit status 2.
    _write_trace(tmp_path / "r0.jsonl", 0, [(1, "completed")])
    cases = {"list": "[1, 2]", "number": "5", "no group": '{"type": "group"}',
             "seq as text": '{"type": "op", "group": "g", "rank": 0, "seq": "1", "op": "allreduce", '
                            '"state": "completed", "queued_us": 1}'}
    for what, line in cases.items():
        (tmp_path / "bad.jsonl").write_text(line + "\n")
        r = subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)
        assert r.returncode == 2 and "bad.jsonl line 1 is not a distc trace record" in r.stderr, (what, r.stderr)
    (tmp_path / "bad.jsonl").write_bytes(b"\xff\xfe\n")
    r = subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "cannot read" in r.stderr, r.stderr


def test_a_dump_cut_short_still_names_the_missing_rank(tmp_path):
    # Rank 1's file ends inside its group record: no collective survives
    # anywhere, and rank 1 is still named (once "every rank's records agree").
    _write_trace(tmp_path / "r0.jsonl", 0, [])
    _write_trace(tmp_path / "r1.jsonl", 1, [])
    text = (tmp_path / "r1.jsonl").read_text().split("\n")
    (tmp_path / "r1.jsonl").write_text(text[0] + "\n" + text[1][:20])
    r = subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1 and "left no trace" in r.stdout, r.stdout + r.stderr


def test_live_takes_a_process_id_only(tmp_path):
    # 0 or a negative would signal a process group, -1 every process we may.
    for pid in ("0", "-1", "-5", "abc", "99999999999999999999"):
        r = subprocess.run([sys.executable, TOOL, "--live", pid, str(tmp_path)], capture_output=True, text=True)
        assert r.returncode == 2 and "is not a process id" in r.stderr, (pid, r.stderr)
