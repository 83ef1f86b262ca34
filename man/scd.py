#!/usr/bin/env python3
"""Builds one hand-written page: man/NAME.scd through scdoc(1) into roff.

  scd.py --scdoc SCDOC --version VERSION IN.scd OUT

@VERSION@ in the source becomes the project's version. scdoc's output is
then tidied so that `mandoc -T lint -W warning` passes: scdoc emits
paragraph macros that do nothing (after headings, before lists), and
mandoc warns about each; and a '-' in text becomes '\\-', so that options
render (and copy) as the ASCII minus they are.
"""

import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roff  # noqa: E402


def minus(line):
    if line.startswith((".", "\\h")):  # requests, and scdoc's bullet motions
        return line
    return re.sub(r"(?<![\\'])-", r"\\-", line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scdoc", default="scdoc")
    ap.add_argument("--version", required=True)
    ap.add_argument("src")
    ap.add_argument("out")
    a = ap.parse_args()
    with open(a.src, encoding="utf-8") as f:
        text = f.read().replace("@VERSION@", a.version)
    r = subprocess.run([a.scdoc], input=text, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"scd: scdoc failed on {a.src}: {r.stderr.strip()}")
    lines = [minus(ln) for ln in roff.tidy(r.stdout.split("\n"))]
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
