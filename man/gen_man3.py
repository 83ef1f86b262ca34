#!/usr/bin/env python3
"""Writes the man3 pages of libdistc from the public headers' doc comments.

  gen_man3.py --include DIR --out DIR [--date YYYY-MM-DD]

One page per exported function (distc_store_get.3), one per header
(libdistc-store.3: its @file text, every function, type and constant) and an
index (libdistc.3). The headers are the single source (DESIGN.md): a
function without a doc comment is an error, not an empty page. Pages are
man(7) that `mandoc -T lint` passes; stale *.3 files in --out are removed.
"""

import argparse
import datetime
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import headerdoc  # noqa: E402
import roff  # noqa: E402

# The umbrella header's order: each area's page lists what it declares.
HEADERS = ["common.h", "version.h", "errors.h", "store.h", "sys/store.h", "work.h", "pg.h", "sys/backend.h",
           "reducer.h", "mem.h"]
MANUAL = "distc Library Functions"


def header_page(path):
    """The page of a header: distc/sys/store.h -> libdistc-sys-store."""
    return "libdistc-" + path[len("distc/") : -2].replace("/", "-")


class Api:
    """Everything the headers declare, by name."""

    def __init__(self, headers, version):
        self.headers = headers
        self.version = version
        self.items = {}
        for h in headers:
            for it in h.items:
                self.items.setdefault(it.name.split("(")[0], it)
        self.functions = [it for h in headers for it in h.items if it.kind == "function"]
        self.fnames = {f.name for f in self.functions}
        self.status = {m.name: m for m in self.items["distc_status"].members}
        self.enum_of = {m.name: it for it in self.items.values() if it.kind == "enum" for m in it.members}
        self.roff = roff.Roff(self.fnames)

    def type_names(self, text, kinds=("struct", "enum", "callback", "opaque")):
        return [t for t in re.findall(r"\bdistc_\w+", text) if t in self.items and self.items[t].kind in kinds]

    def named_in(self, doc):
        """Types a comment points to: enums it names ("a distc_dtype") or whose values it uses."""
        return self.type_names(doc, ("enum",)) + [self.enum_of[c].name for c in re.findall(r"\bDISTC_\w+", doc)
                                                  if c in self.enum_of and c not in self.status]

    def types_for(self, fn):
        """Types a page of `fn` shows: those of its prototype, then those their
        members are declared with, and the enums the comments point to."""
        seen, order = set(), []
        queue = self.type_names(" ".join([fn.ret] + [t for t, _ in fn.params])) + self.named_in(fn.doc)
        while queue:
            t = queue.pop(0)
            if t in seen:
                continue
            seen.add(t)
            order.append(t)
            it = self.items[t]
            queue += self.type_names(" ".join([m.decl for m in it.members] + [p for p, _ in it.params]))
            queue += self.type_names(" ".join([it.doc] + [m.doc + " " + m.note for m in it.members]), ("enum",))
        return [self.items[t] for t in order]

    def constants_for(self, texts, types):
        names = []
        for t in types:
            if t.kind == "struct":
                names += [t.name.upper() + "_VERSION", t.name.upper() + "_INIT"]
        for text in texts:
            names += re.findall(r"\bDISTC_[A-Z0-9_]+\b", text)
        out, seen = [], set()
        for n in names:
            it = self.items.get(n)
            if it and it.kind == "macro" and n not in seen:
                seen.add(n)
                out.append(it)
        return out


def th(api, name, date):
    return f'.TH "{name.upper()}" 3 {date} "distc {api.version}" "{MANUAL}"'


def prototype(api, fn):
    """The declaration as a SYNOPSIS shows it, wrapped at parameters."""
    r = api.roff
    head = f"{r.esc(fn.ret)}{'' if fn.ret.endswith('*') else ' '}\\fB{r.esc(fn.name)}\\fR("
    width = len(fn.ret) + 1 + len(fn.name) + 1
    params = [f"{r.esc(t)}{'' if t.endswith('*') else ' '}\\fI{r.esc(n)}\\fR" for t, n in fn.params] or ["void"]
    plain = [f"{t} {n}" for t, n in fn.params] or ["void"]
    if width + sum(len(p) + 2 for p in plain) <= 78:
        return [head + ", ".join(params) + ");"]
    lines, cur, cur_len = [], head, width
    for i, (p, pl) in enumerate(zip(params, plain)):
        sep = ");" if i == len(params) - 1 else ","
        if cur_len + len(pl) + 1 > 78 and cur != head:
            lines.append(cur.rstrip())
            cur, cur_len = "\\ " * 4, 4
        cur += p + sep + " "
        cur_len += len(pl) + 2
    lines.append(cur.rstrip())
    return lines


def type_block(api, it):
    """A type: its declaration as C, then each documented member."""
    r = api.roff
    out = [f".SS {it.name}"]
    if it.doc:
        out += r.blocks(it.doc)
    if it.kind == "opaque":
        out += [".PP", ".EX", roff.code(it.decl), ".EE"]
        return out
    if it.kind == "callback":
        out += [".PP", ".EX", roff.code(it.decl), ".EE"]
        return out
    word = "enum" if it.kind == "enum" else "struct"
    code = [f"typedef {word} {it.name} {{"]
    for i, m in enumerate(it.members):
        last = i + 1 == len(it.members)
        code.append(f"    {m.decl}{';' if it.kind == 'struct' else '' if last else ','}")
    code.append(f"}} {it.name};")
    out += [".PP", ".EX"] + [roff.code(c) for c in code] + [".EE"]
    for m in it.members:
        if m.note:
            out += r.blocks(m.note)
        if m.doc:
            out += [".TP", f"\\fB{r.esc(m.name)}\\fR"] + r.inline(m.doc)
    return out


def constant_block(api, macros):
    r = api.roff
    out = [".SS Constants"]
    for m in macros:
        out += [".TP", f"\\fB{r.esc(m.name)}\\fR {r.esc(m.value)}".rstrip()]
        out += r.inline(m.doc) if m.doc else [r.esc(default_macro_doc(m))]
    return out


def default_macro_doc(m):
    base = m.name.lower()
    if m.name.endswith("_INIT"):
        return f"Initialises a {base[:-5]} with its defaults."
    if m.name.endswith("_VERSION"):
        return f"The version of {base[:-8]} these headers describe."
    return ""


def split_doc(doc):
    """(@brief, description, @return) of a comment; each may be ""."""
    brief, ret = "", ""
    m = re.search(r"^@return\s+(.*)", doc, re.S | re.M)
    if m:
        doc, ret = doc[: m.start()].rstrip(), m.group(1).strip()
    m = re.match(r"@brief\s+(.*?)(\n\s*\n|$)", doc, re.S)
    if m:
        brief, doc = collapse(m.group(1)), doc[m.end() :]
    return brief, doc, ret


def collapse(s):
    return re.sub(r"\s+", " ", s).strip()


def summary(doc):
    """A page's NAME line: the @brief, else the comment's first sentence without
    its asides, cut at a colon or semicolon when still long."""
    brief, desc, _ = split_doc(doc)
    text = brief or desc
    text = collapse(text.replace("`", ""))
    while True:
        shorter = re.sub(r"\s+\([^()]* [^()]*\)", "", text)
        if shorter == text:
            break
        text = shorter
    s = roff.first_sentence(text)
    if len(s) > 80:
        m = re.search(r"[:;] ", s)
        if m and m.start() >= 12:
            s = s[: m.start()]
    return lower_first(s.rstrip("."))


def lower_first(s):
    """A NAME line starts in lower case, unless with a name (MPI_Comm_split, TCP)."""
    return s[0].lower() + s[1:] if re.match(r"[A-Z](?:[a-z]|\s)", s) else s


def thread_safety(hdr):
    """The header's Thread-safety (or Threads) lines."""
    lines, take = [], False
    for ln in hdr.doc.split("\n"):
        if re.match(r"(Thread-safety|Threads):", ln):
            take = True
        elif take and (not ln.strip() or re.match(r"[A-Z][a-z-]+: ", ln)):
            break
        if take:
            lines.append(ln)
    return "\n".join(lines)


def function_page(api, hdr, fn, date):
    r = api.roff
    if not fn.doc:
        raise SystemExit(f"gen_man3: {fn.name} in {hdr.path} has no doc comment"
                         " (the headers are the man pages' source)")
    _, desc, ret = split_doc(fn.doc)
    out = [th(api, fn.name, date), ".SH NAME", f"{fn.name} \\- {r.esc(summary(fn.doc))}"]
    out += [".SH LIBRARY", "distc (\\fIlibdistc\\fR, \\fB\\-ldistc\\fR; \\fBpkg\\-config \\-\\-libs distc\\fR)"]
    out += [".SH SYNOPSIS", ".nf", f".B #include <{hdr.path}>",
            ".PP"] + prototype(api, fn) + [".fi"]
    out += [".SH DESCRIPTION"] + r.blocks(desc)
    if any("DLTensor" in t for t, _ in fn.params):
        out += [".PP", "Tensors are DLPack \\fBDLTensor\\fRs (\\fI<dlpack/dlpack.h>\\fR), borrowed for the call and,",
                "for asynchronous work, until it completes; what they must be (contiguous, in memory the",
                "backend takes, within \\fBDISTC_TENSOR_MAX_BYTES\\fR) is in",
                f"\\fB{header_page('distc/pg.h')}\\fR(3)."]
    # Opaque handles need no block of their own on a function's page.
    types = [t for t in api.types_for(fn) if t.kind != "opaque"]
    for t in types:
        out += type_block(api, t)
    consts = api.constants_for([fn.doc] + [t.doc + " ".join(m.doc for m in t.members) for t in types], types)
    if consts:
        out += constant_block(api, consts)
    out += [".SH RETURN VALUE"]
    standard = fn.ret == "int" and hdr.path != "distc/errors.h"
    async_out = fn.params and fn.params[0] == ("distc_work **", "out")
    if ret:
        out += r.blocks(ret)
    elif fn.ret == "void":
        out += ["None."]
    elif standard:
        out += ["0 on success, or a negative \\fBdistc_status\\fR code (see \\fBERRORS\\fR)."]
    else:
        raise SystemExit(f"gen_man3: {fn.name} returns {fn.ret}: its comment needs an @return")
    if standard:
        out += [".PP", "After a failure, \\fBdistc_error_last\\fR(3) on the calling thread gives one line naming",
                "the function and what went wrong."]
    if async_out:
        out += [".PP", "With \\fIout\\fR NULL the call blocks until the operation is done and returns its",
                "status. Otherwise it returns once its arguments are checked and the operation is queued,",
                "with a handle in \\fI*out\\fR: \\fBdistc_work_wait\\fR(3) or \\fBdistc_work_test\\fR(3) give its",
                "outcome and \\fBdistc_work_free\\fR(3) releases it. How operations fail when a peer dies,",
                "stalls or aborts is in \\fBdistc\\fR(7) (FAULTS)."]
    if fn.ret == "int":
        codes = []
        for c in re.findall(r"\bDISTC_E[A-Z]+\b", fn.doc):
            if c in api.status and c not in codes:
                codes.append(c)
        if standard and "DISTC_EINVAL" not in codes:
            codes.insert(0, "DISTC_EINVAL")
        if codes:
            out += [".SH ERRORS"]
            if standard:
                out += ["Besides the codes below, an unexpected internal failure is \\fBDISTC_EINTERNAL\\fR",
                        "(a bug: please report it)."]
            for c in codes:
                out += [".TP", f".B {c}"] + r.inline(api.status[c].doc)
    ts = thread_safety(hdr)
    if ts:
        out += [".SH NOTES"] + r.blocks(ts)
    refs = [n for n in dict.fromkeys(re.findall(r"\bdistc_\w+", fn.doc + " " + ret))
            if n in api.fnames and n != fn.name]
    if async_out:
        refs += [n for n in ("distc_work_wait", "distc_work_free") if n not in refs]
    see = [(n, 3) for n in refs] + [(header_page(hdr.path), 3), ("libdistc", 3), ("distc", 7)]
    out += [".SH SEE ALSO"] + roff.see_also(see)
    return out


def header_page_text(api, hdr, date):
    r = api.roff
    name = header_page(hdr.path)
    out = [th(api, name, date), ".SH NAME", f"{name} \\- {r.esc(lower_first(hdr.brief.rstrip('.')))}"]
    out += [".SH LIBRARY", "distc (\\fIlibdistc\\fR, \\fB\\-ldistc\\fR)"]
    out += [".SH SYNOPSIS", ".nf", f".B #include <{hdr.path}>", ".fi"]
    out += [".SH DESCRIPTION"] + (r.blocks(hdr.doc) if hdr.doc else [r.esc(hdr.brief)])
    fns = [it for it in hdr.items if it.kind == "function"]
    if fns:
        out += [".SS Functions"]
        for f in fns:
            out += [".TP", f"\\fB{f.name}\\fR(3)", r.esc(summary(f.doc))]
    for it in hdr.items:
        if it.kind in ("struct", "enum", "callback", "opaque"):
            out += type_block(api, it)
    macros = [it for it in hdr.items if it.kind == "macro" and not it.name.endswith("_DECL")]
    if macros:
        out += constant_block(api, macros)
    see = [(f.name, 3) for f in fns] + [("libdistc", 3), ("distc", 7)]
    out += [".SH SEE ALSO"] + roff.see_also(see)
    return out


def index_page(api, date):
    r = api.roff
    out = [th(api, "libdistc", date), ".SH NAME",
           "libdistc \\- distributed communication with a stable C ABI: stores, process groups, DDP reducer"]
    out += [".SH LIBRARY", "distc (\\fIlibdistc\\fR, \\fB\\-ldistc\\fR)"]
    out += [".SH SYNOPSIS", ".nf", ".B #include <distc.h>", ".PP",
            "cc prog.c $(pkg\\-config \\-\\-cflags \\-\\-libs distc)", ".fi"]
    out += [".SH DESCRIPTION", "\\fI<distc.h>\\fR includes every header below; each may also be included alone."]
    out += [".PP", "Each header has a page with its concepts, types and constants, and every",
            "function has a page of its own. \\fBdistc\\fR(7) is the overview: concepts, environment",
            "variables, the error model, thread-safety and faults."]
    for h in api.headers:
        out += [".SS " + r.esc(h.path), f"\\fB{header_page(h.path)}\\fR(3): {r.esc(h.brief)}", ".PP",
                ", ".join(f"\\fB{f.name}\\fR" for f in h.items if f.kind == "function") + "."]
    see = [(header_page(h.path), 3) for h in api.headers] + [("distc", 7), ("distc\\-run", 1),
                                                                ("distc\\-perf", 1), ("distc\\-store", 1)]
    out += [".SH SEE ALSO"] + roff.see_also(see)
    return out


def read_version(include):
    with open(os.path.join(include, "distc/version.h"), encoding="utf-8") as f:
        m = re.search(r'#define DISTC_VERSION_STRING "([^"]+)"', f.read())
    return m.group(1) if m else "unknown"


def build_date(given):
    if given:
        return given
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else datetime.datetime.now()
    return when.strftime("%Y-%m-%d")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--include", required=True, help="the include directory (holds distc.h)")
    ap.add_argument("--out", required=True, help="the man3 directory to write")
    ap.add_argument("--date", help="the pages' date (default: SOURCE_DATE_EPOCH, else today)")
    a = ap.parse_args()
    date = build_date(a.date)
    headers = headerdoc.parse_all(os.path.join(a.include, "distc"), HEADERS)
    for h in headers:
        h.path = "distc/" + h.path
    api = Api(headers, read_version(a.include))

    pages = {"libdistc": index_page(api, date)}
    for h in headers:
        pages[header_page(h.path)] = header_page_text(api, h, date)
        for fn in (it for it in h.items if it.kind == "function"):
            pages[fn.name] = function_page(api, h, fn, date)

    os.makedirs(a.out, exist_ok=True)
    for old in os.listdir(a.out):
        if old.endswith(".3") and old[:-2] not in pages:
            os.remove(os.path.join(a.out, old))
    for name, lines in pages.items():
        text = "\n".join(roff.tidy(lines)) + "\n"
        path = os.path.join(a.out, name + ".3")
        if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    print(f"gen_man3: {len(api.functions)} function pages, {len(headers)} header pages, 1 index in {a.out}")


if __name__ == "__main__":
    main()
