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
