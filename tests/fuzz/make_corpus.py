#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus (tests/fuzz/corpus/<target>/): one well-formed
input per message kind, so fuzzing starts from inputs that reach deep into
each parser. Run it after changing a wire format; the output is committed."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def s(b):  # a string or byte vector on the store's wire: uint64 length, bytes
    return struct.pack("<Q", len(b)) + b


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


TORCH_MAGIC, DISTC_MAGIC = 0x3C85F7CE, 0x43545344
# PyTorch 1.x numbering: SET=0 COMPARE_SET=1 GET=2 ADD=3 CHECK=4 WAIT=5 GETNUMKEYS=6 WATCH_KEY=7 DELETE_KEY=8
t1 = {
    "t1_set": b"\x00" + s(b"k") + s(b"v"),
    "t1_cas": b"\x01" + s(b"k") + s(b"") + s(b"new"),
    "t1_get": b"\x00" + s(b"k") + s(b"v") + b"\x02" + s(b"k"),
    "t1_add": b"\x03" + s(b"n") + struct.pack("<q", 5),
    "t1_check": b"\x04" + struct.pack("<Q", 2) + s(b"a") + s(b"b"),
    "t1_wait": b"\x05" + struct.pack("<Q", 1) + s(b"never"),
    "t1_numkeys_delete": b"\x06" + b"\x08" + s(b"k"),
}
# PyTorch 2.x (and distc after HELLO): VALIDATE=0 SET=1 COMPARE_SET=2 GET=3 ADD=4 CHECK=5 WAIT=6
# GETNUMKEYS=7 DELETE_KEY=8 APPEND=9 MULTI_GET=10 MULTI_SET=11 CANCEL_WAIT=12 PING=13
v = b"\x00" + struct.pack("<I", TORCH_MAGIC)
t2 = {
    "t2_set_get": v + b"\x01" + s(b"k") + s(b"v") + b"\x03" + s(b"k"),
    "t2_append": v + b"\x09" + s(b"k") + s(b"more"),
    "t2_multi_get": v + b"\x01" + s(b"k") + s(b"v") + b"\x0a" + struct.pack("<Q", 3) + s(b"k") * 3,
    "t2_multi_set": v + b"\x0b" + struct.pack("<Q", 2) + s(b"a") + s(b"1") + s(b"b") + s(b"2"),
    "t2_ping_cancel": v + b"\x0d" + struct.pack("<I", 7) + b"\x0c",
    "t2_add_check": v + b"\x04" + s(b"n") + struct.pack("<q", -3) + b"\x05" + struct.pack("<Q", 1) + s(b"n"),
}
hello = b"\x40" + struct.pack("<II", DISTC_MAGIC, 1)
dc = {
    "distc_get_waits": hello + b"\x03" + s(b"k"),
    "distc_set_get": hello + b"\x01" + s(b"k") + s(b"v") + b"\x03" + s(b"k"),
    "distc_multi_get_huge_count": hello + b"\x0a" + struct.pack("<Q", 1 << 40),
    "distc_huge_value": hello + b"\x01" + s(b"k") + struct.pack("<Q", 1 << 62),
}
for name, data in {**t1, **t2, **dc}.items():
    write("fuzz_store_wire", name, data)

# The mesh: uint32 seq, message count-1, uint16 sizes, then the peer's frames. A frame's
# 40-byte header (backends/host/transport/exchange.hpp): the call (uint32 seq, uint8 kind, dtype, op,
# pad, int32 root, uint32 pad, uint64 count), uint64 len, uint64 expect, then the bytes.
# The fuzzer runs allreduce (kind 0) of 16 uint8 (dtype 2) with SUM (op 0), and sends 8 bytes.
def frame(seq, payload, kind=0, dtype=2, op=0, root=-1, count=16, expect=8):
    return (struct.pack("<IBBBBiIQ", seq, kind, dtype, op, 0, root, 0, count) +
            struct.pack("<QQ", len(payload), expect) + payload)

write("fuzz_mesh_frames", "one_ok", struct.pack("<IB", 7, 0) + struct.pack("<H", 4) + frame(7, b"abcd"))
write("fuzz_mesh_frames", "two_ok", struct.pack("<IB", 9, 1) + struct.pack("<HH", 3, 0) + frame(9, b"xyz") + frame(9, b""))
write("fuzz_mesh_frames", "wrong_seq", struct.pack("<IB", 9, 0) + struct.pack("<H", 2) + frame(8, b"no"))
write("fuzz_mesh_frames", "wrong_len", struct.pack("<IB", 1, 0) + struct.pack("<H", 2) + frame(1, b"long!"))
write("fuzz_mesh_frames", "wrong_call", struct.pack("<IB", 1, 0) + struct.pack("<H", 2) + frame(1, b"ab", kind=1, root=0))
write("fuzz_mesh_frames", "wrong_expect", struct.pack("<IB", 1, 0) + struct.pack("<H", 2) + frame(1, b"ab", expect=3))
# A repeated header: its first word alone (uint32 seq, kind 0xfe, 3 bytes), meaning the link's last
# header with this sequence number. The fuzzer runs a second allreduce (seq + 1) after a first that succeeds.
def repeat(seq, payload):
    return struct.pack("<IBBBB", seq, 0xFE, 0, 0, 0) + payload

write("fuzz_mesh_frames", "repeat_ok", struct.pack("<IB", 3, 1) + struct.pack("<HH", 2, 2) + frame(3, b"ab") +
      repeat(3, b"cd") + repeat(4, b"ef") + repeat(4, b"gh"))
write("fuzz_mesh_frames", "repeat_first", struct.pack("<IB", 3, 0) + struct.pack("<H", 2) + repeat(3, b"ab"))
write("fuzz_mesh_frames", "repeat_then_new", struct.pack("<IB", 5, 1) + struct.pack("<HH", 2, 2) + frame(5, b"ab") +
      frame(5, b"cd", expect=9) + frame(6, b"ef") + repeat(6, b"gh"))
write("fuzz_mesh_frames", "repeat_wrong_len", struct.pack("<IB", 5, 1) + struct.pack("<HH", 2, 40) + frame(5, b"ab") +
      repeat(5, b"x" * 40))
write("fuzz_mesh_frames", "new_where_repeat", struct.pack("<IB", 5, 1) + struct.pack("<HH", 2, 2) + frame(5, b"ab") +
      frame(5, b"cd", count=17))
write("fuzz_mesh_frames", "short", struct.pack("<IB", 1, 0) + struct.pack("<H", 100) + frame(1, b"x" * 100)[:50])

for i, url in enumerate([b"env://", b"tcp://127.0.0.1:29500?rank=0&world_size=2", b"file:///tmp/x?rank=1&world_size=4",
                         b"tcp://[::1]:1?rank=0", b"tcp://h:1?&&rank=0&", b"x://?a=b", b"://", b"tcp://h?rank"]):
    write("fuzz_url", "url%d" % i, url)

# Tensor descriptions: flags, ndim+1, 8 shapes, 8 strides, dtype code, bits exponent, device, ...
def tensor(flags, ndim, shape, strides=(0,) * 8, code=2, bits=2, dev=1, offset=0, where=1):
    shape = list(shape) + [0] * (8 - len(shape))
    strides = list(strides) + [0] * (8 - len(strides))
    return (struct.pack("<BB", flags, ndim + 1) + struct.pack("<8q", *shape) + struct.pack("<8q", *strides) +
            struct.pack("<BB", code, bits) + struct.pack("<i", dev) + b"\x01" + struct.pack("<i", 0) +
            struct.pack("<Q", offset) + struct.pack("<B", where) + struct.pack("<i", 0) + b"\x01" +
            struct.pack("<q", 5000) + b"\x01" + struct.pack("<d", 1.0) + b"\x01" + struct.pack("<q", 4) + b"\x01\x00")

write("fuzz_tensor_args", "f32_4", tensor(0, 1, [4]))
write("fuzz_tensor_args", "f32_2x3_strided", tensor(16, 2, [2, 3], [3, 1]))
write("fuzz_tensor_args", "huge", tensor(0, 1, [1 << 62]))
write("fuzz_tensor_args", "wraps", tensor(0, 2, [1024, (1 << 54) + 1]))
write("fuzz_tensor_args", "offset", tensor(0, 1, [4], offset=(1 << 64) - 8))

# The point-to-point reader (backends/host/transport/tcp/tcp_p2p.cpp): a hello
# ("DC2P", the sender's rank), then messages ("DC2M", uint32 tag, uint64 length, bytes).
P2P_HELLO, P2P_MSG = 0x50324344, 0x4D324344


def p2p_msg(tag, payload):
    return struct.pack("<IIQ", P2P_MSG, tag, len(payload)) + payload


hello1 = struct.pack("<II", P2P_HELLO, 1)
write("fuzz_p2p_frames", "all_three", hello1 + p2p_msg(1, bytes(range(16))) + p2p_msg(2, b"") + p2p_msg(3, b"x" * 64))
write("fuzz_p2p_frames", "early_then_posted", hello1 + p2p_msg(9, b"early") + p2p_msg(1, b"a" * 16))
write("fuzz_p2p_frames", "wrong_size", hello1 + p2p_msg(1, b"short") + p2p_msg(3, b"y" * 64))
write("fuzz_p2p_frames", "stranger", struct.pack("<II", 0xDEADBEEF, 7) + b"junk")
write("fuzz_p2p_frames", "from_rank_2_any", struct.pack("<II", P2P_HELLO, 2) + p2p_msg(3, b"z" * 64))
