"""What the generators share: include/distc.h as SWIG parses it (`swig -xml`),
read with the standard library, and how a generated file is written or
checked against the committed one. julia_gen.py and python_options_gen.py
use it: no hand-written C parser, one source of truth, the header."""
import difflib
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def parse_header():
    """The root of SWIG's XML tree of include/distc.h (and the headers it includes)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "distc.xml")
        subprocess.run(["swig", "-xml", "-module", "distc", "-includeall", "-ignoremissing", "-w201",
                        "-I" + os.path.join(ROOT, "include"), "-o", xml, os.path.join(ROOT, "include", "distc.h")],
                       check=True)
        return ET.parse(xml).getroot()


def attrs(node):
    al = node.find("attributelist")
    return {a.get("name"): a.get("value") for a in (al.findall("attribute") if al is not None else [])}


def parms(node):
    pl = node.find("attributelist/parmlist")
    return [attrs(p) for p in (pl.findall("parm") if pl is not None else [])]


def full_type(a):
    return (a.get("decl") or "") + a["type"]




def write_or_check(path, text, tool, what, check):
    """Writes `text` to `path`, or (check) fails with a diff when the committed file differs."""
    rel = os.path.relpath(path, ROOT)
    if check:
        old = open(path).read() if os.path.exists(path) else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), rel, "generated"))
            sys.exit(f"{tool}: {rel} differs from what include/distc.h gives; run bindings/gen/{tool}.py")
        print(f"{tool}: {rel} is current ({what})")
        return
    with open(path, "w") as f:
        f.write(text)
    print(f"{tool}: wrote {rel} ({what})")
