"""PyTorch 2.x's TCPStore dialect, spoken byte by byte against a distc server.

No PyTorch 2.x is installed here, so this test plays its client from the
protocol's published layout: VALIDATE (0) + uint32 magic 0x3C85F7CE first,
then SET=1 COMPARE_SET=2 GET=3 ADD=4 CHECK=5 WAIT=6 GETNUMKEYS=7 DELETE_KEY=8
APPEND=9 MULTI_GET=10 MULTI_SET=11 CANCEL_WAIT=12 PING=13; lengths and
counters little-endian 64-bit.
"""
import socket
import struct

import pytest

import distc_ctypes as dc

VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, NUMKEYS, DELETE, APPEND, MGET, MSET, CANCEL, PING = range(14)


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


class Raw:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(bytes([VALIDATE]) + struct.pack("<I", 0x3C85F7CE))

    def send(self, op, payload=b""):
        self.sock.sendall(bytes([op]) + payload)

    def recv(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "server closed the connection"
            out += chunk
        return out

    def recv_bytes(self):
        (n,) = struct.unpack("<Q", self.recv(8))
        return self.recv(n)


@pytest.fixture
def server():
    st = dc.Store(is_server=True)
    yield st
    st.close()


def test_torch2_session(server):
    c = Raw(server.port)
    c.send(PING, struct.pack("<I", 12345))
    assert struct.unpack("<I", c.recv(4))[0] == 12345
    c.send(SET, s("/a") + s(b"1\x002"))
    assert server.get("a") == b"1\x002"
    c.send(ADD, s("/n") + struct.pack("<q", 41))
    assert struct.unpack("<q", c.recv(8))[0] == 41
    c.send(COMPARE_SET, s("/a") + s(b"1\x002") + s(b"new"))
    assert c.recv_bytes() == b"new"
    c.send(CHECK, struct.pack("<Q", 2) + s("/a") + s("/zz"))
    assert c.recv(1) == b"\x01"  # NOT_READY
    c.send(APPEND, s("/a") + s(b"+"))
    c.send(MSET, struct.pack("<Q", 2) + s("/m1") + s(b"x") + s("/m2") + s(b"yy"))
    c.send(WAIT, struct.pack("<Q", 1) + s("/m2"))
    assert c.recv(1) == b"\x00"  # STOP_WAITING
    c.send(MGET, struct.pack("<Q", 3) + s("/m2") + s("/a") + s("/m1"))
    assert [c.recv_bytes() for _ in range(3)] == [b"yy", b"new+", b"x"]
    c.send(GET, s("/n"))
    assert c.recv_bytes() == b"41"
    c.send(NUMKEYS)
    assert struct.unpack("<q", c.recv(8))[0] == server.num_keys()
    c.send(DELETE, s("/a"))
    assert struct.unpack("<q", c.recv(8))[0] == 1


def test_torch2_cancel_wait(server):
    """A 2.x client that times out sends CANCEL_WAIT and expects WAIT_CANCELED."""
    c = Raw(server.port)
    c.send(WAIT, struct.pack("<Q", 1) + s("/never"))
    c.send(CANCEL)
    assert c.recv(1) == b"\x01"  # WAIT_CANCELED
    server.set("never", b"now")  # must not produce a late STOP_WAITING
    c.send(PING, struct.pack("<I", 7))
    assert struct.unpack("<I", c.recv(4))[0] == 7
