#!/usr/bin/env python3
"""Checks of the manual pages (cmake/Man.cmake builds them into <build>/man).

  check_man.py pages LIBRARY MAN3_DIR      every function LIBRARY exports has a page naming it
  check_man.py lint MAN_DIR [MANDOC]       mandoc -T lint -W warning passes on every page
  check_man.py options TOOL PAGE           TOOL --help and PAGE's OPTIONS name the same options
  check_man.py environment PAGE SOURCE...  every variable SOURCE reads or sets is in PAGE's ENVIRONMENT

Exit 0: passed; 1: failed (saying what); 77: skipped (no mandoc).
"""

import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def fail(msg):
    print(f"check_man: {msg}")
    sys.exit(1)


def plain(line):
    """A roff text line as it reads: no font escapes, \\- as -."""
    line = re.sub(r"\\f(\[[^]]*\]|.)", "", line)
    return line.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")


def section(page, name):
    """The roff lines of section NAME (.SH NAME up to the next .SH)."""
    with open(page, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, inside = [], False
    for ln in lines:
        if ln.startswith(".SH"):
            inside = ln[3:].strip().strip('"') == name
            continue
        if inside:
            out.append(ln)
    if not out:
        fail(f"{page} has no {name} section")
    return out


def pages(lib, man3):
    r = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"nm {lib}: {r.stderr.strip()}")
    exported = set()
    for ln in r.stdout.split("\n"):
        f = ln.split()
        if len(f) >= 3 and f[1] in "TWi" and f[2].startswith("distc_"):
            exported.add(f[2].split("@")[0])
    if len(exported) < 50:
        fail(f"only {len(exported)} distc_ functions exported by {lib}: is it libdistc?")
    bad = []
    for fn in sorted(exported):
        path = os.path.join(man3, fn + ".3")
        if not os.path.isfile(path):
            bad.append(f"{fn}: no page {path}")
            continue
        name = [ln for ln in section(path, "NAME") if ln.strip()]
        if not name or not plain(name[0]).startswith(fn + " - "):
            bad.append(f"{fn}: {path}'s NAME does not name it")
    documented = {p[:-2] for p in os.listdir(man3) if p.endswith(".3") and p.startswith("distc_")}
    bad += [f"{p}.3 documents a function the library does not export" for p in sorted(documented - exported)]
    if bad:
        fail("\n  ".join(["man3 pages and exported functions differ:"] + bad))
    print(f"check_man: {len(exported)} exported functions, each with its page in {man3}")


def lint(mandir, mandoc):
    mandoc = mandoc or shutil.which("mandoc")
    if not mandoc:
        print("check_man: mandoc not installed (apt-get install mandoc): skipped")
        sys.exit(SKIP)
    found = {}
    for sec in ("1", "3", "7"):
        d = os.path.join(mandir, "man" + sec)
        found[sec] = sorted(os.path.join(d, p) for p in os.listdir(d)) if os.path.isdir(d) else []
    need = {"1": ["distc-run.1", "distc-perf.1", "distc-store.1"], "7": ["distc.7"], "3": ["libdistc.3"]}
    for sec, names in need.items():
        for n in names:
            if os.path.join(mandir, "man" + sec, n) not in found[sec]:
                fail(f"{mandir}/man{sec}/{n} was not built")
    every = [p for sec in found for p in found[sec]]
    r = subprocess.run([mandoc, "-T", "lint", "-W", "warning"] + every, capture_output=True, text=True)
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or out:
        fail(f"mandoc -T lint -W warning (exit {r.returncode}):\n{out}")
    print(f"check_man: {len(every)} pages lint clean (mandoc -T lint -W warning)")


OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def help_options(tool):
    r = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"{tool} --help exited {r.returncode}: {r.stderr.strip()}")
    opts = set()
    for ln in (r.stdout + r.stderr).split("\n"):
        # An option line: indented, starting with a dash; its options end where
        # two spaces start the description.
        m = re.match(r"^\s+(-\S.*?)(\s{2,}|$)", ln)
        if m:
            opts.update(OPTION.findall(m.group(1)))
    return opts


def page_options(page):
    """Options of the OPTIONS section's terms (scdoc puts descriptions in .RS/.RE)."""
    opts, depth = set(), 0
    for ln in section(page, "OPTIONS"):
        if ln.startswith(".RS"):
            depth += 1
        elif ln.startswith(".RE"):
            depth -= 1
        elif depth == 0 and not ln.startswith("."):
            text = plain(ln).strip()
            if text.startswith("-"):
                opts.update(OPTION.findall(text))
    return opts


def options(tool, page):
    in_help, in_page = help_options(tool), page_options(page)
    if len(in_help) < 3:
        fail(f"found only {sorted(in_help)} in {tool} --help")
    bad = [f"{o}: in --help, not in {os.path.basename(page)}'s OPTIONS" for o in sorted(in_help - in_page)]
    bad += [f"{o}: in {os.path.basename(page)}'s OPTIONS, not in --help" for o in sorted(in_page - in_help)]
    if bad:
        fail("\n  ".join([f"{os.path.basename(tool)} --help and its man page disagree:"] + bad))
    print(f"check_man: {os.path.basename(tool)} --help and {os.path.basename(page)} agree on {len(in_help)} options")


# Environment variables in code: literal names passed to getenv and friends,
# the lists env_first() tries, and any literal of the families distc reads.
CALLS = re.compile(r"\b(?:getenv|setenv|set_env_int|spin_from_env)\(\s*\"([A-Z][A-Z0-9_]*)\"")
LISTS = re.compile(r"\benv_first\(\s*\{([^}]*)\}")
FAMILIES = re.compile(r"\"((?:DISTC|GLOO|MASTER|TORCHELASTIC|OMPI_COMM_WORLD|SLURM)_[A-Z0-9_]+)\"")


def variables(sources):
    files = []
    for s in sources:
        if os.path.isdir(s):
            for root, _, names in os.walk(s):
                files += [os.path.join(root, n) for n in names if n.endswith((".c", ".cpp", ".h", ".hpp"))]
        else:
            files.append(s)
    found = {}
    for path in sorted(files):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        names = CALLS.findall(text) + FAMILIES.findall(text)
        for lst in LISTS.findall(text):
            names += re.findall(r"\"([A-Z][A-Z0-9_]*)\"", lst)
        for n in names:
            found.setdefault(n, path)
    return found


def environment(page, sources):
    found = variables(sources)
    floor = 20 if any(os.path.isdir(s) for s in sources) else 1
    if len(found) < floor:
        fail(f"found only {sorted(found)} in {' '.join(sources)}")
    text = " ".join(plain(ln) for ln in section(page, "ENVIRONMENT"))
    missing = [f"{n} (read in {p})" for n, p in sorted(found.items()) if not re.search(rf"\b{n}\b", text)]
    if missing:
        fail("\n  ".join([f"{os.path.basename(page)}'s ENVIRONMENT does not document:"] + missing))
    print(f"check_man: {os.path.basename(page)} documents all {len(found)} environment variables")


def main():
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "pages":
        pages(a[1], a[2])
    elif len(a) in (2, 3) and a[0] == "lint":
        lint(a[1], a[2] if len(a) == 3 else None)
    elif len(a) == 3 and a[0] == "options":
        options(a[1], a[2])
    elif len(a) >= 3 and a[0] == "environment":
        environment(a[1], a[2:])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
