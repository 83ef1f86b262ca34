#!/usr/bin/python3
"""One job, three languages: a 3-rank group whose rank 0 is a C program
(mixed_rank.c, it serves the TCP store), rank 1 Python (mixed_rank.py, the
distc package) and rank 2 Rust (bindings/rust/distc/tests/mixed.rs), meeting
through env:// on one store, over gloo. They run allreduce, broadcast,
allgather and a bytes collective and each checks every result. A PyTorch
process joins the store as a client only (not a group member) and waits for
a key the C rank sets: one store across runtimes.

    run_mixed.py BUILD_DIR C_RANK_BINARY
"""
import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

TORCH_CLIENT = r"""
import datetime, sys, torch.distributed as d
s = d.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, timeout=datetime.timedelta(seconds=60))
s.wait(["mixed/from-c"])
print("TORCH CLIENT got", s.get("mixed/from-c"), flush=True)
s.set("mixed/torch-read-it", "yes")
"""


def rust_rank_binary(build):
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(build, "rust"), DISTC_LIB_DIR=build)
    out = subprocess.run(["cargo", "test", "--offline", "--no-run", "--message-format=json", "--manifest-path",
                          os.path.join(ROOT, "bindings/rust/Cargo.toml"), "--test", "mixed"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True)
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "mixed" and msg.get("executable"):
            return msg["executable"]
    sys.exit("run_mixed: cargo built no 'mixed' test binary")


def main():
    build, c_rank = os.path.abspath(sys.argv[1]), sys.argv[2]
    rust = rust_rank_binary(build)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="3")
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    procs = {
        "C": subprocess.Popen([c_rank], env=dict(env, RANK="0")),
        "Python": subprocess.Popen([PY, os.path.join(HERE, "mixed_rank.py")],
                                   env=dict(env, RANK="1", PYTHONPATH=os.path.join(build, "python"))),
        "Rust": subprocess.Popen([rust, "--exact", "mixed_rank", "--nocapture", "--test-threads=1"],
                                 env=dict(env, RANK="2", DISTC_MIXED_RANK="1")),
        "PyTorch store client": subprocess.Popen([PY, "-c", TORCH_CLIENT, str(port)]),
    }
    failed = []
    for name, p in procs.items():
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "a hang (killed after 120 s)"
        if rc != 0:
            failed.append(f"{name}: {rc}")
    if failed:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        sys.exit("run_mixed: FAILED: " + "; ".join(failed))
    print("run_mixed: C, Python and Rust ranks agree; the PyTorch client read the C rank's key", flush=True)


if __name__ == "__main__":
    main()
