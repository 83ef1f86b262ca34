"""The Python examples (examples/python) run under distc-run with 2 ranks and
print what they should.

The build tree is $DISTC_BUILD (default /work/main/build): its distc-run
launcher and its python/ folder (put on PYTHONPATH for the ranks)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numpy")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"
BUILD = Path(os.environ.get("DISTC_BUILD", "/work/main/build"))
LAUNCHER = BUILD / "distc-run"
RANKS = 2
TIMEOUT_S = 60


def run_example(name, *args):
    if not LAUNCHER.exists():
        pytest.skip(f"no launcher at {LAUNCHER} (set DISTC_BUILD to the build tree)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(BUILD / "python")] + [p for p in [env.get("PYTHONPATH")] if p])
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)  # the launcher sets them
    cmd = [str(LAUNCHER), "-n", str(RANKS), sys.executable, str(EXAMPLES / name), *args]
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} still running after {TIMEOUT_S} s; output so far:\n{e.stdout}\n{e.stderr}")
    assert p.returncode == 0, f"{' '.join(cmd)} exited with {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p.stdout


def by_rank(out):
    """{rank: [lines]} from distc-run's "[rank] line" prefixes."""
    lines = {}
    for line in out.splitlines():
        m = re.match(r"\[(\d+)\] (.*)$", line)
        if m:
            lines.setdefault(int(m.group(1)), []).append(m.group(2))
    return lines


def test_allreduce_example():
    out = run_example("allreduce.py")
    lines = by_rank(out)
    assert sorted(lines) == list(range(RANKS)), out
    for r in range(RANKS):
        assert len(lines[r]) == 1, out
        line = lines[r][0]
        assert line.startswith(f"rank {r} of {RANKS}: allreduce(SUM)"), line
        assert " ok: " in line, line
        # x[i] = sum over ranks of (i + rank) = RANKS * i + RANKS * (RANKS - 1) / 2
        base = RANKS * (RANKS - 1) // 2
        assert f"x[:3] = [{float(base)}, {float(base + RANKS)}, {float(base + 2 * RANKS)}]" in line, line


def test_train_linear_example():
    out = run_example("train_linear.py")
    lines = by_rank(out)
    assert sorted(lines) == list(range(RANKS)), out
    curves, finals = {}, {}
    for r in range(RANKS):
        curve = []
        for line in lines[r]:
            m = re.match(rf"rank {r}/{RANKS} step +(\d+) loss (\S+)$", line)
            if m:
                curve.append((int(m.group(1)), m.group(2)))
            m = re.match(rf"rank {r}/{RANKS} final loss (\S+) .*parameters identical on all ranks: (\w+)$", line)
            if m:
                finals[r] = m.group(1)
                assert m.group(2) == "True", line
        assert len(curve) >= 5, f"rank {r} printed {len(curve)} losses:\n{out}"
        curves[r] = curve
        assert r in finals, f"rank {r} printed no final loss:\n{out}"
    # every rank printed the same losses (as text: bit-identical to 10 digits) and the same final loss
    for r in range(1, RANKS):
        assert curves[r] == curves[0], f"rank {r}'s losses differ from rank 0's:\n{out}"
    assert len(set(finals.values())) == 1, f"final losses differ: {finals}"
    losses = [float(v) for _, v in curves[0]]
    assert float(finals[0]) == losses[-1]
    assert losses[0] / losses[-1] > 1e4, f"the loss went only from {losses[0]} to {losses[-1]}"
    assert losses[-1] < 1e-3, f"final loss {losses[-1]}: not down to the noise level (1e-4)"
    # it goes down over the first steps (later it sits at the noise level)
    early = losses[:4]
    assert all(a > b for a, b in zip(early, early[1:])), f"not decreasing at first: {early}"


def test_torch_ddp_example():
    pytest.importorskip("torch")
    out = run_example("torch_ddp.py")
    assert out.count("identical on all ranks: True") == RANKS, out
    losses = [float(m) for m in re.findall(r"step +0 loss ([0-9.]+)", out)]
    final = [float(m) for m in re.findall(r"step 200 loss ([0-9.]+)", out)]
    assert len(losses) == RANKS and len(final) == RANKS, out
    assert max(final) < min(losses) / 4, f"the loss did not fall: {losses} -> {final}"


def test_hang_named_by_the_flight_recorder(tmp_path):
    """examples/python/hang.py: the last rank skips an all_reduce; the others
    time out and dump by themselves; distc-trace names the last rank."""
    os.environ["DISTC_TRACE_DIR"] = str(tmp_path)
    try:
        out = run_example("hang.py")
    finally:
        del os.environ["DISTC_TRACE_DIR"]
    assert "allreduce #6" in out and "timed out" in out
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "distc-trace"), str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"verdict: rank 1 never called allreduce #6 of group default_pg; rank 0 waited 3\.\d s",
                     r.stdout), r.stdout
