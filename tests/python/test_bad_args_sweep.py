"""A hostile bad-argument sweep over every function of include/distc.h.

The functions and their parameter types come from SWIG's XML parse of
include/distc.h (as bindings/gen/julia_gen.py reads it: no hand-kept list).
For each `distc_*` function a bounded set of argument combinations is built
from its parameter types and names: a baseline (handles NULL, outputs
pointing at zeroed storage, other pointers NULL, integers 0) and, one
parameter at a time, hostile values (NULL and junk strings, extreme
integers, invalid enum values, option structs of version 0 and 99, ...);
arrays whose elements must not be NULL are also given one NULL (or zeroed
DLTensor) element with a count of 1.
Store operations are swept a second time with a live in-process hash store
(no sockets), so that their other argument checks are reached.

Every function's calls run in a child process (bad_args_child.py) under a timeout, so a crash or a hang is attributed to the
function and the combination instead of taking pytest down. Nothing here
makes the library listen or connect: handles are NULL (or a hash store),
options are NULL or of an invalid version, URLs are malformed.

The checks (DESIGN.md, "C ABI conventions"): no crash, no hang; a call whose
arguments include a NULL handle, a NULL required output or input, an invalid
enum value or options version (or another documented EINVAL case) returns a
negative code with a distc_error_last() that names the function; every
failure names the function and returns a code of distc_status;
distc_error_last() is never NULL; the always-succeeding functions keep
their documented contracts.

Run by hand with Debian's interpreter:
    DISTC_SWEEP_REPORT=/tmp/sweep.txt /usr/bin/python3 -m pytest -q -s -p no:cacheprovider \
        tests/python/test_bad_args_sweep.py
The library is $DISTC_LIB (set by CTest), else $DISTC_BUILD/libdistc.so.0, else build/libdistc.so.0.
"""
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from bad_args_cases import *  # noqa: F401,F403 (the rules, the header parse, the cases)

# distc_error_last() quotes callers' strings, cut to about 2 KiB (capi/errors.cpp).
MAX_MESSAGE = 2100
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad_args_child.py")

# ---------------------------------------------------------------------------------------------------------------
# The parent: one child per function, crash and hang attribution, the report.

def lib_path():
    if os.environ.get("DISTC_LIB"):
        return os.environ["DISTC_LIB"]
    build = os.environ.get("DISTC_BUILD", os.path.join(ROOT, "build"))
    return os.path.join(build, "libdistc.so.0")


def child_env():
    """The environment without anything that could point the library at a peer, a plugin or a launcher."""
    drop = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|"
                      r"TORCHELASTIC_.*|OMPI_.*|PMI_.*|PMIX_.*|SLURM_.*|DISTC_.*|NCCL_.*|GLOO_.*)$")
    return {k: v for k, v in os.environ.items() if not drop.match(k)}


def run_function(fn, entry, lib):
    cases = entry["cases"]
    tmp = tempfile.mkdtemp(prefix="distc-sweep-")  # the child's cwd: file-store paths land here
    try:
        spec = os.path.join(tmp, "spec.json")
        with open(spec, "w") as fh:
            json.dump({"lib": lib, "name": fn, "ret": entry["f"]["ret"], "ret_ctype": entry["ret_ctype"],
                       "params": [dict(p, ctype=c) for p, c in zip(entry["f"]["params"], entry["ctypes"])],
                       "cases": [{"args": c["args"]} for c in cases]}, fh)
        results = [None] * len(cases)
        start, hangs, runs = 0, 0, 0
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        while start < len(cases):
            rpath = os.path.join(tmp, f"results{runs}.jsonl")
            epath = os.path.join(tmp, f"stderr{runs}.txt")
            runs += 1
            with open(epath, "w") as err:
                proc = subprocess.Popen([sys.executable, CHILD, spec, rpath,
                                         str(start)], cwd=work, env=child_env(), stdin=subprocess.DEVNULL,
                                        stdout=err, stderr=err)
                try:
                    rc, hung = proc.wait(timeout=FUNC_TIMEOUT_S), False
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rc, hung = proc.wait(), True
            inflight = None
            if os.path.exists(rpath):
                for line in open(rpath):
                    try:
                        d = json.loads(line)
                    except ValueError:
                        continue  # a line cut short by a crash
                    if d["ev"] == "start":
                        inflight = d["i"]
                    else:
                        results[d["i"]] = d
                        inflight = None
            tail = open(epath, errors="replace").read()[-2000:]
            if not hung and rc == 0:
                break
            if inflight is None:  # died outside a call (loading, setup, exit)
                first = next((i for i in range(start, len(cases)) if results[i] is None), None)
                what = "hang" if hung else f"crash (exit status {rc})"
                if first is None:  # every call returned: it died at exit
                    results.append({"i": len(cases), "ev": "done", "rc": "crash", "outside": True,
                                    "detail": f"{what} after its last call", "tail": tail})
                else:
                    for i in range(first, len(cases)):
                        results[i] = {"i": i, "ev": "done", "rc": "not run",
                                      "detail": f"child {what} outside a call", "tail": tail}
                break
            if hung:
                results[inflight] = {"i": inflight, "ev": "done", "rc": "hang",
                                     "detail": f"no return within {FUNC_TIMEOUT_S:g} s", "tail": tail}
                hangs += 1
            else:
                sig = -rc if rc < 0 else None
                results[inflight] = {"i": inflight, "ev": "done", "rc": "crash",
                                     "detail": f"signal {sig}" if sig else f"exit status {rc}", "tail": tail}
            start = inflight + 1
            if hangs >= MAX_HANGS_PER_FUNCTION:
                for i in range(start, len(cases)):
                    results[i] = {"i": i, "ev": "done", "rc": "not run", "detail": "after repeated hangs"}
                break
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def code_name(hdr, rc, fn=None):
    if not isinstance(rc, int):
        return rc
    if fn in DATA_RETURNS:
        return "data"
    return hdr["enums"]["distc_status"].get(rc, f"unknown({rc})")


def run_sweep():
    t0 = time.monotonic()
    hdr = parse_header()
    plan, skipped = build_cases(hdr)
    lib = lib_path()
    assert os.path.exists(lib), f"no library at {lib} (set DISTC_LIB or DISTC_BUILD)"
    jobs = max(2, min(8, os.cpu_count() or 2))
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        futs = {fn: ex.submit(run_function, fn, e, lib) for fn, e in plan.items()}
        outcomes = {fn: f.result() for fn, f in futs.items()}
    calls = []
    for fn, e in plan.items():
        for i, r in enumerate(outcomes[fn]):
            case = e["cases"][i] if i < len(e["cases"]) else {"args": [], "desc": "(process exit)", "due": []}
            calls.append(dict(r or {"rc": "lost"}, fn=fn, desc=case["desc"], due=case["due"]))
    sweep = {"hdr": hdr, "plan": plan, "calls": calls, "skipped": skipped, "lib": lib,
             "seconds": time.monotonic() - t0, "exported": exported_functions(lib)}
    sweep["findings"] = findings(sweep)
    report(sweep)
    return sweep


def exported_functions(lib):
    nm = shutil.which("nm")
    if not nm:
        return None
    out = subprocess.run([nm, "-D", "--defined-only", lib], stdout=subprocess.PIPE, universal_newlines=True,
                         check=True).stdout
    return {ln.split()[-1].split("@")[0] for ln in out.splitlines() if re.search(r" T distc_", ln)}


def polling(fn):
    return fn in ("distc_work_test", "distc_work_error")  # may return DISTC_INPROGRESS (work.h)


def findings(sweep):
    """Lists of (function, combination, what happened), one per kind of violation."""
    hdr = sweep["hdr"]
    known = set(hdr["enums"]["distc_status"])
    f = collections.defaultdict(list)
    for c in sweep["calls"]:
        fn, rc, where = c["fn"], c["rc"], f"{c['fn']}({c['desc']})"
        if rc in ("crash", "hang", "not run", "lost"):
            f["crash_or_hang"].append(f"{where}: {rc} {c.get('detail', '')}".rstrip()
                                      + (f"\n    stderr: ...{c['tail'][-600:]}" if c.get("tail") else ""))
            continue
        if c.get("err_null"):
            f["error_last_null"].append(f"{where}: distc_error_last() returned NULL")
        if fn in EXEMPT:
            continue
        if isinstance(rc, int) and rc not in known or (rc == 1 and not polling(fn)):
            f["unknown_code"].append(f"{where}: returned {rc}, not a distc_status" +
                                     (" (DISTC_INPROGRESS outside polling calls)" if rc == 1 else ""))
        if c["due"]:
            if rc == "void":
                continue
            if not (isinstance(rc, int) and rc < 0):
                f["success_where_error_due"].append(f"{where}: returned {code_name(hdr, rc)}; due: "
                                                    + "; ".join(c["due"]))
                continue
        if isinstance(rc, int) and rc < 0 and not (c.get("msg_len") and c.get("names_fn")):
            kind = "due_error_message" if c["due"] else "failure_message"
            f[kind].append(f"{where}: {code_name(hdr, rc)} with distc_error_last() = {c.get('msg')!r}")
        if isinstance(rc, int) and rc < 0 and c.get("last_code") != rc:
            f["note_last_code_mismatch"].append(f"{where}: returned {rc}, distc_error_last_code() {c['last_code']}")
        if c.get("multiline") or c.get("ctrl") or (c.get("msg_len") or 0) > MAX_MESSAGE:
            f["message_form"].append(f"{where}: {c.get('msg_len')} bytes, newline or control bytes: "
                                     f"{c.get('msg')!r:.160}")
        if isinstance(rc, int) and rc < 0 and c.get("names_fn") and not c.get("starts_fn"):
            f["note_message_not_led_by_fn"].append(f"{where}: {c.get('msg')!r:.160}")
        if isinstance(rc, int) and rc < 0 and c.get("utf8") is False:
            f["note_invalid_utf8_in_message"].append(f"{where}: invalid UTF-8 echoed: {c.get('msg')!r:.120}")
    # Contracts of the exempt functions.
    for c in sweep["calls"]:
        fn, where = c["fn"], f"{c['fn']}({c['desc']})"
        if fn not in EXEMPT or c["rc"] in ("crash", "hang", "not run", "lost"):
            continue
        if fn in ("distc_version", "distc_strerror", "distc_error_last", "distc_dtype_name") and c["rc"] != "ptr":
            f["exempt_contract"].append(f"{where}: returned NULL")
        if fn == "distc_version" and not re.match(r"^\d+\.\d+\.\d+$", c.get("str") or ""):
            f["exempt_contract"].append(f"{where}: {c.get('str')!r} is not MAJOR.MINOR.PATCH")
        arg = lambda: sweep["plan"][fn]["cases"][c["i"]]["args"][0][1]  # noqa: E731
        if fn == "distc_error_set" and c["rc"] != arg():
            f["exempt_contract"].append(f"{where}: returned {c['rc']}, documented to return its code {arg()}")
        if fn in ("distc_dtype_size", "distc_dtype_name") and arg() not in hdr["enums"]["distc_dtype"]:
            want = 0 if fn == "distc_dtype_size" else "unknown"
            got = c["rc"] if fn == "distc_dtype_size" else c.get("str")
            if got != want:
                f["exempt_contract"].append(f"{where}: gave {got!r}, documented {want!r} for an unknown dtype")
    return f


def report(sweep):
    hdr, calls, plan = sweep["hdr"], sweep["calls"], sweep["plan"]
    fnd = sweep["findings"]
    lines = []
    w = lines.append
    ran = [c for c in calls if c["rc"] not in ("not run", "lost")]
    due = [c for c in ran if c["due"] and c["rc"] != "void" and c["fn"] not in EXEMPT]
    w("distc bad-argument sweep")
    w(f"  library                     {sweep['lib']}")
    w(f"  functions in the header     {len(hdr['functions'])}"
      + ("" if sweep["exported"] is None else f" (exported by the library: {len(sweep['exported'])})"))
    w(f"  exempt (cannot fail)        {len([fn for fn in plan if fn in EXEMPT])}")
    w(f"  calls tried                 {len(ran)} (unfair combinations skipped: {sweep['skipped']}; "
      f"not run: {len(calls) - len(ran)})")
    w(f"  calls where an error is due {len(due)}")
    w(f"  wall time                   {sweep['seconds']:.1f} s")
    w("")
    w("  outcomes by code")
    by = collections.Counter(code_name(hdr, c["rc"], c["fn"]) for c in calls)
    for k, v in sorted(by.items(), key=lambda kv: -kv[1]):
        w(f"    {k:<28}{v}")
    w("")
    w("  findings")
    for k in ("crash_or_hang", "success_where_error_due", "due_error_message", "failure_message", "unknown_code",
              "error_last_null", "exempt_contract", "message_form", "note_last_code_mismatch",
              "note_message_not_led_by_fn", "note_invalid_utf8_in_message"):
        w(f"    {k:<28}{len(fnd.get(k, []))}")
    w("")
    w(f"  {'function':<44}{'calls':>6}{'due':>5}{'bad':>5}  codes")
    for fn, e in plan.items():
        cs = [c for c in calls if c["fn"] == fn]
        bad = sum(1 for k, v in fnd.items() if not k.startswith("note") for x in v
                  if x.startswith(fn + "(") or x.startswith(fn + ":"))
        codes = collections.Counter(code_name(hdr, c["rc"], fn) for c in cs)
        tag = " (exempt)" if fn in EXEMPT else ""
        w(f"  {fn:<44}{len(cs):>6}{sum(1 for c in cs if c['due'] and fn not in EXEMPT):>5}{bad:>5}  "
          + ", ".join(f"{k} x{v}" for k, v in codes.most_common()) + tag)
    for k, v in sorted(fnd.items()):
        if v:
            w("")
            w(f"  {k} ({len(v)})")
            for x in v:
                w(f"    {x}")
    w("")
    w("  recorded outcomes where no error is due (not asserted)")
    for c in calls:
        if not c["due"] and c["fn"] not in EXEMPT and c["rc"] not in ("not run", "lost"):
            m = f" -- {c['msg']!r:.110}" if isinstance(c["rc"], int) and c["rc"] < 0 else ""
            w(f"    {c['fn']}({c['desc']}): {code_name(hdr, c['rc'], c['fn'])}{m}")
    text = "\n".join(lines) + "\n"
    if os.environ.get("DISTC_SWEEP_JSON"):  # every call's record, for a closer look
        with open(os.environ["DISTC_SWEEP_JSON"], "w") as fh:
            json.dump(calls, fh, indent=1)
    print("\n" + text)
    if os.environ.get("DISTC_SWEEP_REPORT"):
        with open(os.environ["DISTC_SWEEP_REPORT"], "w") as fh:
            fh.write(text)


# ---------------------------------------------------------------------------------------------------------------
# The tests.

@pytest.fixture(scope="module")
def sweep():
    return run_sweep()


def _fail_if(items, what):
    if items:
        raise AssertionError(f"{len(items)} {what}:\n  " + "\n  ".join(items[:40]))


def test_every_exported_function_is_swept(sweep):
    swept = set(sweep["plan"])
    assert len(swept) > 50, "the header parse found too few functions"
    if sweep["exported"] is not None:
        assert swept <= sweep["exported"], f"in the header, not exported: {sorted(swept - sweep['exported'])}"
        assert sweep["exported"] <= swept, f"exported, not in the header: {sorted(sweep['exported'] - swept)}"
    for fn, e in sweep["plan"].items():
        assert e["cases"], f"{fn}: no combinations"
        assert len(e["cases"]) <= 24, f"{fn}: {len(e['cases'])} combinations (keep it bounded)"


def test_no_crash_no_hang(sweep):
    _fail_if(sweep["findings"].get("crash_or_hang", []), "calls crashed, hung or were not run")


def test_bad_arguments_are_errors(sweep):
    _fail_if(sweep["findings"].get("success_where_error_due", []), "calls succeeded where an error is due")


def test_due_errors_name_the_function(sweep):
    _fail_if(sweep["findings"].get("due_error_message", []),
             "due errors without a distc_error_last() naming the function")


def test_every_failure_names_the_function(sweep):
    _fail_if(sweep["findings"].get("failure_message", []), "failures without a message naming the function")


def test_messages_are_short_single_lines(sweep):
    _fail_if(sweep["findings"].get("message_form", []),
             "messages over the length bound, with a newline or with control bytes")


def test_codes_are_distc_status(sweep):
    _fail_if(sweep["findings"].get("unknown_code", []), "calls returned a code outside distc_status")


def test_error_last_never_null(sweep):
    _fail_if(sweep["findings"].get("error_last_null", []), "calls left distc_error_last() NULL")


def test_exempt_contracts(sweep):
    for fn in EXEMPT:
        assert fn in sweep["plan"], f"the allow-list names {fn}, which the header does not declare"
    _fail_if(sweep["findings"].get("exempt_contract", []), "broken contracts of always-succeeding functions")


