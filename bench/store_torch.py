#!/usr/bin/python3
"""PyTorch's TCPStore measured the way bench/store_bench.c measures distc.

    /usr/bin/python3 bench/store_torch.py [--host ADDR] [--port PORT]
        [--clients 1,4] [--iters N] [--warmup N] [--value-size BYTES]
        [--ops set,get,add] [--json]
    /usr/bin/python3 bench/store_torch.py --serve [--port-file PATH]

Without --port it starts a PyTorch TCPStore server (is_master=True, port 0)
in this process; with --port it connects PyTorch clients to an existing server
(a distc one, for instance). --serve only runs a PyTorch server until killed
(for distc's client to measure against) and writes its port to --port-file.

Every client is a process forked (multiprocessing, "fork") before the server
starts, holding one torch.distributed.TCPStore client. For each (op, clients)
row, the clients do their warm-up operations, start together and each times
--iters calls one by one. Reported: mean, p50 and p99 of the per-call latency
over every call of every client, and aggregate ops/s = all timed calls / (last
client's end - first client's start), with CLOCK_MONOTONIC as the C program.

- set: no reply in the protocol; each client ends with one add(key, 0) round
  trip so that ops/s counts only what the server processed.
- get: the key exists beforehand. PyTorch's client sends WAIT then GET.
- add: delta 1 on a per-client counter; the final value is checked.

Timings are printed, never judged. Needs PyTorch (Debian's 1.13 is importable
from /usr/bin/python3).
"""
import argparse
import array
import datetime
import json
import multiprocessing as mp
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

OPS = ("set", "get", "add")


def make_store(host, port, is_master, timeout_s):
    return dist.TCPStore(host, port, None, is_master,
                         timeout=datetime.timedelta(seconds=timeout_s),
                         wait_for_workers=False)


def worker_main(index, conn, args, parent_pid):
    """Runs rows on command: ('run', op, port, iters, warmup) -> ('ready',), then
    waits for 'go' -> ('done', t_start_ns, t_end_ns, latencies_ns_bytes)."""
    store = None
    value = bytes((ord("a") + i % 26) for i in range(args.value_size))
    keys = {op: "distc-bench/%s/%d/%d" % (op, parent_pid, index) for op in OPS}
    sync_key = "distc-bench/sync/%d/%d" % (parent_pid, index)
    now = time.monotonic_ns
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        if msg is None:
            break
        _, op, port, iters, warmup = msg
        try:
            if store is None:
                store = make_store(args.host, port, False, args.timeout_s)
            if op == "set":
                key = keys["set"]

                def one():
                    store.set(key, value)
            elif op == "get":
                key = keys["get"]
                store.set(key, value)
                expect = len(value)

                def one():
                    if len(store.get(key)) != expect:
                        raise RuntimeError("get returned a value of the wrong size")
            else:
                key = keys["add"]

                def one():
                    return store.add(key, 1)
            first = None
            for i in range(warmup):
                r = one()
                if i == 0:
                    first = r
            store.add(sync_key, 0)
            conn.send(("ready",))
            if conn.recv() != "go":
                break
            lat = array.array("q", bytes(8 * iters))
            t_start = prev = now()
            for i in range(iters):
                r = one()
                t = now()
                lat[i] = t - prev
                prev = t
                if first is None:
                    first = r
            if op == "set":
                store.add(sync_key, 0)
            t_end = now()
            if op == "add" and r - first != warmup + iters - 1:
                raise RuntimeError("add: counter went from %d to %d over %d adds" % (first, r, warmup + iters))
            if op == "set" and len(store.get(key)) != len(value):
                raise RuntimeError("set: the value read back has the wrong size")
            conn.send(("done", t_start, t_end, lat.tobytes()))
        except Exception as e:  # report, then stop this client
            conn.send(("error", "client %d: %s: %s" % (os.getpid(), type(e).__name__, e)))
            break
    conn.close()


def pct(sorted_ns, p):
    n = len(sorted_ns)
    rank = min(max(int(p / 100.0 * n + 0.999999), 1), n)
    return sorted_ns[rank - 1] / 1000.0


def run_row(workers, port, op, clients, args):
    conns = [w[1] for w in workers[:clients]]
    for c in conns:
        c.send(("run", op, port, args.iters, args.warmup))
    errors = []
    for c in conns:
        m = c.recv()
        if m[0] != "ready":
            errors.append(m[1])
    if errors:
        raise RuntimeError("; ".join(errors))
    for c in conns:
        c.send("go")
    lat = array.array("q")
    t0, t1 = None, None
    for c in conns:
        m = c.recv()
        if m[0] != "done":
            errors.append(m[1])
            continue
        lat.frombytes(m[3])
        t0 = m[1] if t0 is None else min(t0, m[1])
        t1 = m[2] if t1 is None else max(t1, m[2])
    if errors:
        raise RuntimeError("; ".join(errors))
    v = sorted(lat)
    return {
        "mean_us": sum(v) / len(v) / 1000.0,
        "p50_us": pct(v, 50),
        "p99_us": pct(v, 99),
        "ops_per_s": len(v) / ((t1 - t0) / 1e9),
    }


def serve(args):
    store = make_store(args.host, args.port or 0, True, args.timeout_s)
    port = store.port
    print("torch TCPStore %s listening on port %d" % (torch.__version__, port), flush=True)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    while not stop:
        time.sleep(0.1)
    del store


def parse_list(s, conv, what):
    try:
        out = [conv(x) for x in s.split(",") if x]
    except ValueError:
        out = []
    if not out:
        raise argparse.ArgumentTypeError("bad %s: %r" % (what, s))
    return out


def main():
    ap = argparse.ArgumentParser(description="PyTorch TCPStore set/get/add latency and ops/s")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="use this server; default: start one here")
    ap.add_argument("--clients", default="1,4", help="client process counts, one row each (default 1,4)")
    ap.add_argument("--iters", type=int, default=10000, help="timed operations per client (default 10000)")
    ap.add_argument("--warmup", type=int, default=-1, help="untimed operations first (default iters/10, >= 100)")
    ap.add_argument("--value-size", type=int, default=64)
    ap.add_argument("--ops", default="set,get,add")
    ap.add_argument("--timeout-s", type=float, default=30.0)
    ap.add_argument("--json", action="store_true", help="one JSON object per (op, clients) row")
    ap.add_argument("--serve", action="store_true", help="only run a PyTorch server until killed")
    ap.add_argument("--port-file", help="with --serve: write the port here")
    args = ap.parse_args()
    if args.serve:
        return serve(args)
    clients = parse_list(args.clients, int, "--clients")
    ops = parse_list(args.ops, str, "--ops")
    if any(op not in OPS for op in ops) or any(c < 1 for c in clients) or args.iters < 1 or args.value_size < 0:
        ap.error("bad --ops, --clients, --iters or --value-size")
    if args.warmup < 0:
        args.warmup = max(100, args.iters // 10)

    ctx = mp.get_context("fork")
    workers = []
    for i in range(max(clients)):  # before the server's thread exists
        parent_end, child_end = ctx.Pipe()
        p = ctx.Process(target=worker_main, args=(i, child_end, args, os.getpid()), daemon=True)
        p.start()
        child_end.close()
        workers.append((p, parent_end))

    server = None
    port = args.port
    if not port:
        server = make_store(args.host, 0, True, args.timeout_s)
        port = server.port
    nproc = os.cpu_count()
    if not args.json:
        print("# store_torch.py: torch %s client -> %s server %s:%d" %
              (torch.__version__, "external" if args.port else "in-process torch", args.host, port))
        print("# %d timed ops per client after %d warm-up, value %d B, nproc %d; latency per call, "
              "ops/s summed over clients" % (args.iters, args.warmup, args.value_size, nproc))
        print("%-4s %7s %10s %10s %10s %12s" % ("op", "clients", "mean_us", "p50_us", "p99_us", "ops/s"), flush=True)
    rc = 0
    try:
        for op in ops:
            for c in clients:
                r = run_row(workers, port, op, c, args)
                if args.json:
                    row = {"client": "torch", "server": "external" if args.port else "torch", "host": args.host,
                           "port": port, "protocol": "torch", "op": op, "clients": c, "iters": args.iters,
                           "warmup": args.warmup, "value_size": args.value_size,
                           "mean_us": round(r["mean_us"], 3), "p50_us": round(r["p50_us"], 3),
                           "p99_us": round(r["p99_us"], 3), "ops_per_s": round(r["ops_per_s"], 1),
                           "nproc": nproc, "torch_version": torch.__version__}
                    print(json.dumps(row), flush=True)
                else:
                    print("%-4s %7d %10.1f %10.1f %10.1f %12.0f" %
                          (op, c, r["mean_us"], r["p50_us"], r["p99_us"], r["ops_per_s"]), flush=True)
    except (RuntimeError, EOFError, OSError) as e:
        print("store_torch.py: %s" % (e or "a client died"), file=sys.stderr)
        rc = 1
    for p, conn in workers:
        try:
            conn.send(None)
        except OSError:
            pass
        conn.close()
    for p, conn in workers:
        p.join(10)
        if p.is_alive():
            p.terminate()
    del server
    return rc


if __name__ == "__main__":
    sys.exit(main())
