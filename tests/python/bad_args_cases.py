"""The bad-argument sweep's cases (test_bad_args_sweep.py says what the sweep
is): the rules that decide which arguments are hostile and which calls must
fail, the parse of include/distc.h through SWIG's XML, and the bounded set of
argument combinations built for every function."""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FUNC_TIMEOUT_S = float(os.environ.get("DISTC_SWEEP_TIMEOUT", "20"))  # per child run (one function)
MAX_HANGS_PER_FUNCTION = 2  # after that, the function's remaining combinations are not run
STORAGE = 4096  # bytes of every "valid pointer to zeroed storage"
LIVE_STORE_TIMEOUT_MS = 200  # the live hash store's default timeout (get of a missing key)

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
UINT32_MAX, UINT64_MAX = 2 ** 32 - 1, 2 ** 64 - 1
SIZE_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1

# 64 KiB of printable junk without '/' or ':' (it can never spell a path or a URL scheme).
_JUNK_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 _.-%?&=+*#@!~"
JUNK = b"junk-" + bytes(_JUNK_CHARS[(i * 7919 + i // 13) % len(_JUNK_CHARS)] for i in range(65536 - 5))
# Invalid UTF-8 (a lone continuation, an overlong NUL, a surrogate, 0xff) and control characters.
BAD = b"\xff\xfe\xc0\x80bad\x01\x02\x1b[31m\r\n\tutf8\xed\xa0\x80\x80\x7f"
SMALL = b"hostile\x00\xff\xfe-bytes"  # 16 bytes

TOKEN_TEXT = {"NULL": "NULL", "OUT": "&zeroed", "ZBUF": "&zeroed", "SMALL": "&16 bytes", "STR_OK": '"sweep-key"',
              "PARR_ZT": "[&zeroed DLTensor]",
              "STR_EMPTY": '""', "STR_JUNK": "64KiB junk", "STR_BAD": "bad UTF-8/ctrl", "OPT_V0": "opts{version 0}",
              "OPT_V99": "opts{version 99}", "LIVE_STORE": "live hash store"}

# ---------------------------------------------------------------------------------------------------------------
# Knowledge from the header docs that types alone do not give.

# Functions exempt from the "a bad argument is an error" rule: they cannot fail by design. Each is still called
# with hostile arguments (it must not crash) and its own documented contract is checked in test_exempt_contracts.
EXEMPT = {
    "distc_buf_dispose": "void; NULL and an already disposed buffer are documented no-ops",
    "distc_version": "no arguments; documented never NULL",
    "distc_version_number": "no arguments; returns data, not a status",
    "distc_strerror": "documented: a static name for any code, never NULL",
    "distc_error_last": "documented: never NULL",
    "distc_error_last_code": "returns data (the last code), not a status",
    "distc_error_clear": "void; no arguments",
    "distc_error_set": "documented: records and returns its `code` argument (callback helper), not a status",
    "distc_store_free": "void; documented: NULL is a no-op",
    "distc_work_free": "void; documented: NULL is a no-op",
    "distc_pg_free": "void; documented: NULL is a no-op",
    "distc_reducer_free": "void; documented: NULL is a no-op",
    "distc_dtype_size": "returns data; documented: 0 for an unknown value",
    "distc_dtype_name": "documented: \"unknown\" for an unknown value, never NULL",
}

# Outputs the header documents as optional (NULL allowed). Every other output pointer is required.
NULLABLE_OUT = {
    ("distc_store_add", "out"): "the new value 'may be NULL'",
    ("distc_store_compare_set", "out"): "'out may be NULL'",
    ("distc_store_delete_key", "out"): "'*out (may be NULL)'",
    ("distc_work_error", "message"): "'*message (may be NULL)'",
    ("distc_reducer_bucket_stats", "bytes"): "'Any output may be NULL'",
    ("distc_reducer_bucket_stats", "launch_ns"): "'Any output may be NULL'",
    ("distc_reducer_bucket_stats", "reduce_ns"): "'Any output may be NULL'",
    ("distc_gather_bytes", "outs"): "'ignored, may be NULL' on non-roots",
}
# Array outputs that are only required when their count is > 0.
NULLABLE_WHEN_EMPTY = {("distc_store_multi_get", "values"): "n"}
# `distc_work **out` of collectives: NULL means "block until done" (work.h).
WORK_OUT_TYPE = "p.p.distc_work"

# Option structs that NULL does not stand in for (NULL options otherwise mean defaults).
REQUIRED_OPTS = {"distc_tcp_store_options": "the defaults are a client without host (documented bad options)",
                 "distc_store_vtable": "documented: EINVAL when the vtable is NULL",
                 "distc_backend_ops": "a backend is its vtable"}
# String inputs without which the call means nothing.
REQUIRED_STRINGS = {"key", "prefix", "path", "url", "name"}
# Integer parameters that carry an enum (int32_t in the prototype).
NAMED_ENUMS = {"dtype": "distc_dtype", "op": "distc_reduce_op", "builtin": "distc_reducer_builtin_hook"}

# Pointer -> its length parameter: NULL with a length > 0 is an error; a valid buffer is never paired with a
# length beyond it (a lie of the caller, not a fair test).
PAIRS = {
    "distc_buf_set": {"data": "len"},
    "distc_store_set": {"value": "len"},
    "distc_store_append": {"value": "len"},
    "distc_store_compare_set": {"expected": "expected_len", "desired": "desired_len"},
    "distc_store_check": {"keys": "n"},
    "distc_store_wait": {"keys": "n"},
    "distc_store_multi_get": {"keys": "n", "values": "n"},
    "distc_store_multi_set": {"keys": "n", "values": "n", "lens": "n"},
    "distc_pg_new_subgroup": {"ranks": "n"},
    "distc_allreduce_coalesced": {"tensors": "n"},
    "distc_batch_isend_irecv": {"ops": "n"},
    "distc_all_gather_bytes": {"data": "len"},
    "distc_gather_bytes": {"data": "len"},
    "distc_backend_combine": {"dst": "count", "src": "count"},
    "distc_backend_scale": {"data": "count"},
    "distc_compute_bucket_assignment_by_size": {"bucket_of": "n", "tensors": "n", "limits": "n_limits"},
    "distc_reducer_new": {"grads": "n"},
    "distc_reducer_prepare_for_backward": {"unused": "n_unused"},
}

# Pointer arrays whose elements must not be NULL; swept as [NULL] with a count of 1 (fair: the array has it).
NULL_ELEMENT_ERRORS = {"keys": "a NULL key", "tensors": "documented: a NULL or malformed tensor",
                       "grads": "a NULL gradient"}
# Baselines other than 0 where 0 would mask every other check of the function.
BASELINE = {("distc_backend_scale", "dtype"): 8}  # DISTC_DTYPE_FLOAT32: bool "cannot be scaled" at all
# Functions that return data in their int, not a status: shown as "data" in the report.
DATA_RETURNS = {"distc_version_number", "distc_error_last_code", "distc_error_set", "distc_dtype_size"}

_URL_FORMS = re.compile(rb"^(env://|tcp://|file://|[a-z0-9_-]+://)")
_BACKEND_NAME = re.compile(rb"^[a-z0-9_-]+$")
_STR_BYTES = {"STR_EMPTY": b"", "STR_JUNK": JUNK, "STR_BAD": BAD, "STR_OK": b"sweep-key"}


def _doc_rules(fn, a):
    """Other documented EINVAL cases: `a` maps parameter names to tokens."""
    iv = lambda name: a[name][1]  # noqa: E731
    out = []
    if fn == "distc_compute_bucket_assignment_by_size":
        if iv("n") == 0:
            out.append("n == 0 (documented EINVAL)")
        if a["limits"] == "NULL" or iv("n_limits") == 0:
            out.append("no limits (documented EINVAL)")
    if fn in ("distc_rendezvous", "distc_pg_new_from_url") and a["url"] in _STR_BYTES \
            and not _URL_FORMS.match(_STR_BYTES[a["url"]]):
        out.append("malformed url (documented EINVAL)")
    if fn == "distc_backend_register" and a["name"] in _STR_BYTES and not _BACKEND_NAME.match(_STR_BYTES[a["name"]]):
        out.append("name not [a-z0-9_-]+ (documented)")
    if fn == "distc_store_set_timeout" and iv("timeout_ms") <= 0:
        out.append("timeout_ms must be > 0 (documented)")
    return out


# Store operations swept again with a live hash store. distc_pg_new is left out on purpose: with a real store
# it would rendezvous and could open sockets.
LIVE_STORE_EXCLUDE = {"distc_pg_new", "distc_store_free"}  # and the free: the child frees the live store itself

# ---------------------------------------------------------------------------------------------------------------
# The header, through SWIG.

INT_TYPES = {"int": (ctypes.c_int, INT32_MIN, INT32_MAX), "int32_t": (ctypes.c_int32, INT32_MIN, INT32_MAX),
             "int64_t": (ctypes.c_int64, INT64_MIN, INT64_MAX), "uint64_t": (ctypes.c_uint64, 0, UINT64_MAX),
             "size_t": (ctypes.c_size_t, 0, SIZE_MAX), "unsigned int": (ctypes.c_uint, 0, UINT32_MAX),
             "uint32_t": (ctypes.c_uint32, 0, UINT32_MAX)}
HANDLES = {"distc_store", "distc_pg", "distc_work", "distc_reducer"}
FREE_OF = {"distc_store": "distc_store_free", "distc_pg": "distc_pg_free", "distc_work": "distc_work_free",
           "distc_reducer": "distc_reducer_free"}


def parse_header():
    """{functions: [{name, ret, params: [{name, type}]}], enums: {name: {value: member}}, constants: {...},
    versioned: {struct: version field first}} from SWIG's XML of include/distc.h."""
    import xml.etree.ElementTree as ET
    sys.path.insert(0, os.path.join(ROOT, "bindings", "gen"))
    try:
        from julia_gen import Types, attrs, close_paren, parms
    finally:
        sys.path.pop(0)
    swig = shutil.which("swig")
    if not swig:
        import pytest  # only the test process parses the header
        pytest.skip("swig is not installed: the sweep takes its function list from SWIG's parse of the header")
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "distc.xml")
        subprocess.run([swig, "-xml", "-module", "distc", "-includeall", "-ignoremissing", "-w201",
                        "-I" + os.path.join(ROOT, "include"), "-o", xml, os.path.join(ROOT, "include", "distc.h")],
                       check=True)
        root = ET.parse(xml).getroot()
    types = Types(root)
    funcs = []
    for c in root.iter("cdecl"):
        a = attrs(c)
        if a.get("kind") != "function" or not a["name"].startswith("distc_"):
            continue
        decl = a["decl"]
        ret = decl[close_paren(decl, 2) + 2:] + a["type"]
        ps = [{"name": p.get("name") or f"arg{i}", "type": p["type"]}
              for i, p in enumerate(parms(c)) if not (p.get("type") == "void" and not p.get("name"))]
        funcs.append({"name": a["name"], "ret": ret, "params": ps})
    enums = {}
    for e in root.iter("enum"):
        name = attrs(e).get("name")
        prev, members = -1, {}
        for it in e.iter("enumitem"):
            b = attrs(it)
            v = b.get("enumvalue")
            prev = int(v) if v not in (None, "") else prev + 1
            members[prev] = b["name"]
        enums[name] = members
    consts = {}
    for c in root.iter("constant"):
        a = attrs(c)
        consts.setdefault(a["name"], a.get("value"))
    versioned = set()
    for c in root.iter("class"):
        fields = c.findall("cdecl")
        if fields and attrs(fields[0]).get("name") == "version":
            versioned.add(attrs(c)["name"])
    return {"functions": funcs, "enums": enums, "constants": consts, "versioned": versioned, "types": types}


def current_version(hdr, struct_name):
    v = hdr["constants"].get(struct_name.upper() + "_VERSION")
    assert v is not None, f"no {struct_name.upper()}_VERSION for the versioned struct {struct_name}"
    return int(v)


def classify(hdr, fn, p):
    """(kind, detail) of one parameter."""
    t, name, types = p["type"], p["name"], hdr["types"]
    if t in types.fnptrs:
        return "callback", None
    if t in types.enums or t.replace("enum ", "") in types.enums:
        return "enum", t.replace("enum ", "")
    if t in INT_TYPES:
        if name in NAMED_ENUMS:
            return "enum", NAMED_ENUMS[name]
        if t == "unsigned int" and name == "version" and fn.endswith("_options_init"):
            return "version", None
        return "int", t
    if t == "double":
        return "double", None
    if not t.startswith("p."):
        raise AssertionError(f"{fn}: no hostile values for the parameter type {t!r} of {name}")
    inner = t[2:]
    const = inner.startswith("q(const).")
    if const:
        inner = inner[len("q(const)."):]
    if inner in HANDLES:
        return "handle", inner
    if not const:
        if inner.startswith("p."):
            return "out", inner  # T ** outputs (handles, strings, views)
        if inner in hdr["versioned"]:
            return "out", inner  # the struct an *_options_init fills
        if inner == "distc_buf" or inner in INT_TYPES:
            return "out", inner
        if inner == "void":
            return "mut", None  # in/out memory, payloads and streams
        if inner == "DLTensor":
            return "dltensor", None
    else:
        if inner == "char":
            return "string", None
        if inner == "void":
            return "bytes", None
        if inner in hdr["versioned"]:
            return "options", inner
        if inner == "DLTensor":
            return "dltensor", None
        if inner.startswith("p."):
            return "ptrarray", inner  # const char *const *, DLTensor *const *, const void *const *
        if inner in INT_TYPES or inner in types.structs:
            return "inarray", inner
    raise AssertionError(f"{fn}: no hostile values for the parameter type {t!r} of {name}")


def hostile_values(hdr, fn, p, kind, detail, live):
    """(baseline token, [variation tokens]) of one parameter."""
    if kind == "handle":
        return ("LIVE_STORE", []) if live and detail == "distc_store" else ("NULL", [])
    if kind == "out":
        return "OUT", ["NULL"]
    if kind in ("mut", "dltensor", "ptrarray", "inarray"):
        return "NULL", ["ZBUF"]
    if kind == "string":
        return ("STR_OK", ["NULL", "STR_EMPTY", "STR_JUNK", "STR_BAD"]) if live else \
            ("NULL", ["STR_EMPTY", "STR_JUNK", "STR_BAD"])
    if kind == "bytes":
        return "NULL", ["SMALL"]
    if kind == "options":
        return "NULL", ["OPT_V0", "OPT_V99"]
    if kind == "callback":
        return "NULL", []
    if kind == "enum":
        return ["I", 0], [["I", -1], ["I", 99], ["I", INT32_MAX]]
    if kind == "version":
        cur = current_version(hdr, classify(hdr, fn, {"name": "opts", "type": fn_params(hdr, fn)[0]["type"]})[1])
        vs = list(range(1, cur + 1)) + [cur + 1, 99, UINT32_MAX]
        return ["I", 0], [["I", v] for v in dict.fromkeys(vs)]
    if kind == "double":
        return ["F", "0"], [["F", "-1"], ["F", "nan"], ["F", "inf"]]
    if kind == "int":
        _, lo, hi = INT_TYPES[detail]
        return ["I", 0], ([["I", -1], ["I", lo], ["I", hi]] if lo < 0 else [["I", 1], ["I", hi]])
    raise AssertionError(kind)


def fn_params(hdr, fn):
    return next(f for f in hdr["functions"] if f["name"] == fn)["params"]


def token_text(tok):
    if isinstance(tok, list):
        v = tok[1]
        names = {INT32_MIN: "INT32_MIN", INT32_MAX: "INT32_MAX", INT64_MIN: "INT64_MIN", INT64_MAX: "INT64_MAX",
                 UINT32_MAX: "UINT32_MAX", UINT64_MAX: "UINT64_MAX/SIZE_MAX"}
        return names.get(v, str(v)) if tok[0] == "I" else v
    return TOKEN_TEXT.get(tok, tok)


def due_reasons(hdr, f, kinds, args):
    """Why this combination must fail (empty: no error is due, the outcome is only recorded)."""
    fn = f["name"]
    a = {p["name"]: tok for p, tok in zip(f["params"], args)}
    pairs = PAIRS.get(fn, {})
    length = lambda ptr: a[pairs[ptr]][1] if ptr in pairs else None  # noqa: E731
    out = []
    for p, (kind, detail), tok in zip(f["params"], kinds, args):
        n = p["name"]
        if kind == "handle" and tok == "NULL":
            out.append(f"NULL handle {n}")
        elif kind == "out" and tok == "NULL" and (fn, n) not in NULLABLE_OUT and p["type"] != WORK_OUT_TYPE:
            cnt = NULLABLE_WHEN_EMPTY.get((fn, n))
            if cnt is None or a[cnt][1] > 0:
                out.append(f"NULL required output {n}")
        elif kind == "options" and tok in ("OPT_V0", "OPT_V99"):
            out.append(f"invalid version of {n}")
        elif kind == "options" and tok == "NULL" and detail in REQUIRED_OPTS:
            out.append(f"NULL required {n}")
        elif kind == "version":
            cur = current_version(hdr, kinds[0][1])
            if not 1 <= tok[1] <= cur:
                out.append(f"invalid options version {tok[1]}")
        elif kind == "enum" and tok[1] not in hdr["enums"].get(detail, {}):
            out.append(f"invalid {detail} {n}={tok[1]}")
        elif kind == "string" and tok == "NULL" and n in REQUIRED_STRINGS:
            out.append(f"NULL required string {n}")
        if tok == "NULL" and length(n):
            out.append(f"NULL {n} with {pairs[n]} > 0")
        if tok == "ZBUF" and kind == "ptrarray" and n in NULL_ELEMENT_ERRORS and length(n):
            out.append(f"NULL element {n}[0] ({NULL_ELEMENT_ERRORS[n]})")
        if tok == "PARR_ZT" and length(n):
            out.append(f"malformed (zeroed) tensor {n}[0]")
    return out + _doc_rules(fn, a)


def unfair(f, args):
    """A valid buffer paired with a length beyond it: the caller's lie, not a fair test."""
    a = {p["name"]: tok for p, tok in zip(f["params"], args)}
    for ptr, ln in PAIRS.get(f["name"], {}).items():
        cap = len(SMALL) if a[ptr] == "SMALL" else STORAGE // 16  # 16: the largest element (distc_buf)
        if a[ptr] not in ("NULL",) and a[ln][1] > cap:
            return True
    return False


def ctype_name(hdr, t):
    """How the child passes a SWIG type: "ptr" (pointers, callbacks), an INT_TYPES key, "double" or "enum"."""
    if t.startswith("p.") or t in hdr["types"].fnptrs:
        return "ptr"
    if t in INT_TYPES or t in ("double", "void"):
        return t
    if t in hdr["types"].enums or t.replace("enum ", "") in hdr["types"].enums:
        return "enum"
    raise AssertionError(f"no ctypes type for {t!r}")


def build_cases(hdr):
    """{function: [case]}; a case: {args: [token], desc, due: [reason]}."""
    plan, skipped = {}, 0
    for f in hdr["functions"]:
        fn = f["name"]
        kinds = [classify(hdr, fn, p) for p in f["params"]]
        phases = [False]
        if fn not in LIVE_STORE_EXCLUDE and any(k == ("handle", "distc_store") for k in kinds):
            phases.append(True)
        cases, seen = [], set()
        for live in phases:
            vals = [hostile_values(hdr, fn, p, k, d, live) for p, (k, d) in zip(f["params"], kinds)]
            base = [["I", BASELINE[(fn, p["name"])]] if (fn, p["name"]) in BASELINE else b
                    for p, (b, _) in zip(f["params"], vals)]
            combos = [(base, "baseline")]
            for i, (p, (_, vs)) in enumerate(zip(f["params"], vals)):
                for v in vs:
                    combos.append((base[:i] + [v] + base[i + 1:], f"{p['name']}={token_text(v)}"))
            # Pairs: an array of one bad element with a count of 1 (reaches the per-element checks).
            names = [p["name"] for p in f["params"]]
            for ptr, ln in PAIRS.get(fn, {}).items():
                i, j = names.index(ptr), names.index(ln)
                if kinds[i][0] != "ptrarray" or ptr not in NULL_ELEMENT_ERRORS:
                    continue
                for v in ["ZBUF"] + (["PARR_ZT"] if "DLTensor" in kinds[i][1] else []):
                    args = list(base)
                    args[i], args[j] = v, ["I", 1]
                    combos.append((args, f"{ptr}={'[NULL]' if v == 'ZBUF' else token_text(v)}, {ln}=1"))
            for args, desc in combos:
                key = json.dumps(args)
                if key in seen:
                    continue
                seen.add(key)
                if unfair(f, args):
                    skipped += 1
                    continue
                cases.append({"args": args, "desc": ("[live store] " if live else "") + desc,
                              "due": due_reasons(hdr, f, kinds, args)})
        plan[fn] = {"f": f, "kinds": kinds, "cases": cases, "ret_ctype": ctype_name(hdr, f["ret"]),
                    "ctypes": [ctype_name(hdr, p["type"]) for p in f["params"]]}
    return plan, skipped


