"""The bad-argument sweep's child process: loads the library, makes one
function's calls as the spec file lists them and writes each outcome as it
comes, so that a crash or a hang is pinned to its combination. Run by
test_bad_args_sweep.py as `bad_args_child.py SPEC RESULTS START`."""
import ctypes
import json
import struct
import sys
import time

from bad_args_cases import *  # noqa: F401,F403 (the rules and constants)
from bad_args_cases import _STR_BYTES

# ---------------------------------------------------------------------------------------------------------------
# The child: runs one function's cases from `start` on, one JSON line per event in the results file.

def _ctype(name):
    if name == "ptr":
        return ctypes.c_void_p
    if name == "double":
        return ctypes.c_double
    if name == "enum":
        return ctypes.c_int  # C enums are int-sized here
    return INT_TYPES[name][0]


def _is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def child_main(spec_path, results_path, start):
    spec = json.load(open(spec_path))
    L = ctypes.CDLL(spec["lib"])
    L.distc_error_last.restype = ctypes.c_void_p
    L.distc_error_last.argtypes = []
    L.distc_error_last_code.restype = ctypes.c_int
    for n in ("distc_store_free", "distc_pg_free", "distc_work_free", "distc_reducer_free", "distc_buf_dispose"):
        getattr(L, n).argtypes = [ctypes.c_void_p]
        getattr(L, n).restype = None
    L.distc_store_new_hash.argtypes = [ctypes.c_void_p]
    L.distc_store_set_timeout.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    fn = spec["name"]
    func = getattr(L, fn)
    func.argtypes = [_ctype(p["ctype"]) for p in spec["params"]]
    ret = spec["ret"]
    func.restype = None if ret == "void" else _ctype(spec["ret_ctype"])
    res = open(results_path, "a")

    def emit(d):
        res.write(json.dumps(d) + "\n")
        res.flush()

    for i, case in enumerate(spec["cases"]):
        if i < start:
            continue
        keep, args, live = [], [], []
        for tok in case["args"]:
            if isinstance(tok, list):
                args.append(tok[1] if tok[0] == "I" else float(tok[1]))
            elif tok == "NULL":
                args.append(None)
            elif tok == "PARR_ZT":  # one pointer to a zeroed DLTensor
                t = ctypes.create_string_buffer(STORAGE)
                arr = (ctypes.c_void_p * 1)(ctypes.addressof(t))
                keep += [t, arr]
                args.append(ctypes.addressof(arr))
            elif tok in ("OUT", "ZBUF") or tok.startswith("OPT_V"):
                b = ctypes.create_string_buffer(STORAGE)
                if tok.startswith("OPT_V"):
                    struct.pack_into("I", b, 0, int(tok[5:]))
                keep.append(b)
                args.append(ctypes.addressof(b))
            elif tok == "SMALL" or tok in _STR_BYTES:
                b = ctypes.create_string_buffer(SMALL if tok == "SMALL" else _STR_BYTES[tok])
                keep.append(b)
                args.append(ctypes.addressof(b))
            elif tok == "LIVE_STORE":
                h = ctypes.c_void_p()
                assert L.distc_store_new_hash(ctypes.byref(h)) == 0
                assert L.distc_store_set_timeout(h, LIVE_STORE_TIMEOUT_MS) == 0
                live.append(h.value)
                args.append(h.value)
            else:
                raise AssertionError(tok)
        L.distc_error_clear()
        emit({"i": i, "ev": "start"})
        t0 = time.monotonic()
        r = func(*args)
        dt = time.monotonic() - t0
        ep = L.distc_error_last()
        msg = None if not ep else ctypes.string_at(ep)
        d = {"i": i, "ev": "done", "s": round(dt, 4), "last_code": L.distc_error_last_code(),
             "err_null": msg is None}
        if msg is not None:
            d.update(msg=msg[:300].decode("utf-8", "replace"), msg_len=len(msg),
                     names_fn=fn.encode() in msg, starts_fn=msg.startswith(fn.encode()), multiline=b"\n" in msg,
                     ctrl=any(b < 0x20 or b == 0x7f for b in msg), utf8=_is_utf8(msg))
        if ret == "void":
            d["rc"] = "void"
        elif ret.startswith("p."):
            d["rc"] = "ptr" if r else "NULL"
            d["str"] = None if not r else ctypes.string_at(r)[:200].decode("utf-8", "replace")
        else:
            d["rc"] = r
        emit(d)
        # Release what a successful call handed out (exercises the free functions on live handles too).
        if d["rc"] == 0 and ret == "int":
            for p, tok, a in zip(spec["params"], case["args"], args):
                if tok != "OUT":
                    continue
                h = p["type"][4:] if p["type"].startswith("p.p.") else None
                if h in FREE_OF:
                    ptr = ctypes.c_void_p.from_address(a).value
                    if ptr:
                        getattr(L, FREE_OF[h])(ptr)
                elif p["type"] == "p.distc_buf":
                    L.distc_buf_dispose(a)
        for h in live:
            L.distc_store_free(h)
    res.close()



if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
