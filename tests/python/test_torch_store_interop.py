"""Wire compatibility with PyTorch's TCPStore (Debian python3-torch, 1.x), both ways.

Run with Debian's interpreter: /usr/bin/python3 -m pytest tests/python
"""
import datetime
import os
import subprocess
import sys
import textwrap
import time

import pytest

torch_dist = pytest.importorskip("torch.distributed")
import distc_ctypes as dc  # noqa: E402

TIMEOUT = datetime.timedelta(seconds=10)
BUILD = os.environ.get("DISTC_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))


def torch_client(port, world_size=None, wait=False):
    return torch_dist.TCPStore("127.0.0.1", port, world_size, False, TIMEOUT, wait_for_workers=wait)


def torch_server(world_size=None, wait=False):
    return torch_dist.TCPStore("127.0.0.1", 0, world_size, True, TIMEOUT, wait_for_workers=wait)


@pytest.fixture
def distc_server():
    s = dc.Store(is_server=True)
    yield s
    s.close()


def test_torch_client_on_distc_server(distc_server):
    t = torch_client(distc_server.port)
    t.set("a", b"x\x00y")
    assert distc_server.get("a") == b"x\x00y"
    distc_server.set("b", b"from distc")
    assert t.get("b") == b"from distc"
    assert t.add("ctr", 5) == 5
    assert distc_server.add("ctr", 2) == 7
    assert t.get("ctr") == b"7"  # counters are decimal text in both libraries
    assert t.compare_set("cs", "", "v1") == b"v1"
    assert distc_server.compare_set("cs", b"v1", b"v2") == b"v2"
    assert t.compare_set("cs", "nope", "v3") == b"v2"
    t.wait(["a", "b"])  # torch 1.x's Python API has no check()
    n = t.num_keys()
    assert n == distc_server.num_keys()
    assert t.delete_key("a") and not distc_server.check(["a"])
    assert t.num_keys() == n - 1
    t.set_timeout(datetime.timedelta(milliseconds=300))
    with pytest.raises(RuntimeError):
        t.get("never")
    with pytest.raises(RuntimeError):
        t.wait(["never"], datetime.timedelta(milliseconds=200))


def test_torch_client_waits_for_distc_set(distc_server):
    t = torch_client(distc_server.port)
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import distc_ctypes as dc
        s = dc.Store(port={distc_server.port})
        time.sleep(0.2)
        s.set("late", b"arrived")
    """)
    p = subprocess.Popen([sys.executable, "-c", code])
    assert t.get("late") == b"arrived"
    assert p.wait(timeout=20) == 0


@pytest.mark.parametrize("protocol", [dc.PROTOCOL_AUTO, dc.PROTOCOL_TORCH1])
def test_distc_client_on_torch_server(protocol):
    ts = torch_server()
    c = dc.Store(port=ts.port, protocol=protocol)
    c.set("k", b"v\x00w")
    assert ts.get("k") == b"v\x00w"
    ts.set("t", "tv")
    assert c.get("t") == b"tv"
    assert c.add("n", 3) == 3 and ts.add("n", 1) == 4 and c.get("n") == b"4"
    assert c.compare_set("cs", b"", b"1") == b"1"
    assert c.compare_set("cs", b"1", b"2") == b"2"
    assert ts.get("cs") == b"2"
    assert c.check(["k", "t"]) and not c.check(["zzz"])
    c.wait(["k", "t"], 1000)
    c.append("k", b"++")  # PyTorch 1.x has no APPEND: emulated with COMPARE_SET
    assert ts.get("k") == b"v\x00w++"
    c.multi_set(["m1", "m2"], [b"one", b"two"])
    assert ts.get("m1") == b"one" and ts.get("m2") == b"two"
    assert c.multi_get(["m2", "m1"]) == [b"two", b"one"]
    assert c.num_keys() == ts.num_keys()
    assert c.delete_key("k") and not c.check(["k"])
    c.set_timeout(300)
    with pytest.raises(dc.DistcError) as e:
        c.get("never")
    assert e.value.code == dc.ETIMEOUT and "'never'" in str(e.value)
    assert c.get("t") == b"tv"  # the client reconnects after a timed-out wait
    c.close()


def test_distc_only_client_refuses_torch_server():
    ts = torch_server()
    with pytest.raises(dc.DistcError) as e:
        dc.Store(port=ts.port, protocol=dc.PROTOCOL_DISTC)
    assert "not a distc store server" in str(e.value)


def test_mixed_worker_counting_torch_master():
    """A PyTorch master waiting for 3 workers is released by 2 distc clients."""
    code = textwrap.dedent("""
        import datetime, sys, torch.distributed as d
        s = d.TCPStore("127.0.0.1", int(sys.argv[1]), 3, True, datetime.timedelta(seconds=20))
        print("ready", flush=True)
    """)
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-c", code, str(port)], stdout=subprocess.PIPE, text=True)
    # The server listens once torch is imported, which under the sanitizer
    # preload can take longer than a client's default 10 s of connecting.
    a = dc.Store(port=port, world_size=3, timeout_ms=120000)
    b = dc.Store(port=port, world_size=3, timeout_ms=120000)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0 and "ready" in out
    a.close()
    b.close()


def test_mixed_worker_counting_distc_master():
    """A distc master waiting for 3 workers is released by 2 PyTorch clients."""
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    code = textwrap.dedent("""
        import datetime, sys, torch.distributed as d
        s = d.TCPStore("127.0.0.1", int(sys.argv[1]), 3, False, datetime.timedelta(seconds=20))
        s.set("worker" + sys.argv[2], "here")
    """)
    ps = [subprocess.Popen([sys.executable, "-c", code, str(port), str(i)]) for i in range(2)]
    m = dc.Store(port=port, is_server=True, world_size=3, timeout_ms=120000)  # torch imports slowly under sanitizers
    assert m.multi_get(["worker0", "worker1"]) == [b"here", b"here"]
    for p in ps:
        assert p.wait(timeout=30) == 0
    m.close()


def test_torch_gloo_job_rendezvous_through_distc_store_tool():
    """Two PyTorch ranks run a gloo allreduce using the standalone distc-store server."""
    tool = os.path.join(BUILD, "distc-store")
    if not os.path.exists(tool):
        pytest.skip("distc-store not built")
    port_file = f"/tmp/distc-store-port-{os.getpid()}"
    srv = subprocess.Popen([tool, "--host", "127.0.0.1", "--port", "0", "--port-file", port_file],
                           stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 10
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            assert time.time() < deadline and srv.poll() is None
            time.sleep(0.02)
        port = int(open(port_file).read())
        code = textwrap.dedent("""
            import datetime, sys, torch, torch.distributed as d
            rank, port = int(sys.argv[1]), int(sys.argv[2])
            store = d.TCPStore("127.0.0.1", port, 2, False, datetime.timedelta(seconds=30))
            d.init_process_group("gloo", store=store, rank=rank, world_size=2)
            t = torch.tensor([rank + 1.0])
            d.all_reduce(t)
            assert t.item() == 3.0, t
            d.barrier()
            print("ok", rank, flush=True)
        """)
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
        ps = [subprocess.Popen([sys.executable, "-c", code, str(r), str(port)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env) for r in range(2)]
        for r, p in enumerate(ps):
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            assert f"ok {r}" in out
    finally:
        srv.terminate()
        srv.wait(timeout=10)
        if os.path.exists(port_file):
            os.unlink(port_file)


def test_torch_client_sees_server_death():
    s = dc.Store(is_server=True)
    t = torch_client(s.port)
    t.set("x", "1")
    s.close()
    time.sleep(0.1)
    with pytest.raises(Exception):
        t.get("x2")


def test_token_server_refuses_torch_clients_by_default():
    """PyTorch's protocol cannot prove a token: such a client is dropped at its first query."""
    s = dc.Store(is_server=True, token="s3cret")
    try:
        t = torch_client(s.port)
        with pytest.raises(RuntimeError):
            t.set("a", "b")
            t.get("a")
        # distc clients: the right token is served, a wrong or missing one refused with the reason.
        ok = dc.Store(port=s.port, token="s3cret")
        ok.set("k", b"v")
        assert s.get("k") == b"v"
        ok.close()
        with pytest.raises(dc.DistcError) as e:
            dc.Store(port=s.port, token="guess")
        assert e.value.code == dc.EREMOTE and "rejected the token" in str(e.value)
        with pytest.raises(dc.DistcError) as e:
            dc.Store(port=s.port, token="")
        assert e.value.code == dc.EREMOTE and "requires a token (set DISTC_STORE_TOKEN" in str(e.value)
    finally:
        s.close()


def test_token_server_admits_torch_clients_when_told():
    s = dc.Store(is_server=True, token="s3cret", allow_torch_clients=1)
    try:
        t = torch_client(s.port)
        t.set("a", b"from torch")
        assert s.get("a") == b"from torch"
        s.set("b", b"from distc")
        assert t.get("b") == b"from distc"
        assert t.add("n", 2) == 2
    finally:
        s.close()


def test_distc_store_tool_with_token_file(tmp_path):
    """distc-store --token-file: distc clients with the token are served, PyTorch ones refused and logged."""
    tool = os.path.join(BUILD, "distc-store")
    if not os.path.exists(tool):
        pytest.skip("distc-store not built")
    token_file = tmp_path / "token"
    token_file.write_text("tool-secret\n")
    port_file = tmp_path / "port"
    env = {k: v for k, v in os.environ.items() if k != "DISTC_STORE_TOKEN"}
    srv = subprocess.Popen([tool, "--host", "127.0.0.1", "--port-file", str(port_file), "--token-file",
                            str(token_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.time() + 10
        while not (port_file.exists() and port_file.read_text().strip()):
            assert time.time() < deadline and srv.poll() is None
            time.sleep(0.02)
        port = int(port_file.read_text())
        c = dc.Store(port=port, token="tool-secret")
        c.set("k", b"v")
        assert c.get("k") == b"v"
        c.close()
        t = torch_client(port)
        with pytest.raises(RuntimeError):
            t.set("a", "b")
            t.get("a")
    finally:
        srv.terminate()
        out, err = srv.communicate(timeout=10)
    assert "PyTorch-protocol client" in err, err
