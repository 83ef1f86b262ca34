"""Reads the public headers' doc comments: the single source of the man3 pages.

A small parser for the subset of C the headers use (DESIGN.md: C99, no
unions, no bitfields): `/** ... */` before a declaration documents it,
`/**< ... */` after a member documents that member, and the `@file` block
documents the header. It keeps what a page needs: functions (DISTC_EXTERN),
structs with their members, enums with their values, callback typedefs,
opaque handles and #define constants, each with its comment.
"""

import re
from dataclasses import dataclass, field

IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass
class Member:
    decl: str  # "int32_t rank" / "int (*create)(void **group, ...)"
    name: str
    doc: str = ""
    note: str = ""  # a plain /* */ comment that precedes it (a group of members)


@dataclass
class Item:
    kind: str  # function, struct, enum, callback, opaque, macro
    name: str
    header: str  # "distc/store.h"
    doc: str = ""
    decl: str = ""  # the declaration, comments stripped, whitespace collapsed
    ret: str = ""  # functions: the return type
    params: list = field(default_factory=list)  # functions and callbacks: [(type, name)]
    members: list = field(default_factory=list)  # structs and enums: [Member]
    value: str = ""  # macros


@dataclass
class Header:
    path: str  # "distc/store.h"
    brief: str = ""
    doc: str = ""  # the @file block's text after @brief
    items: list = field(default_factory=list)


def clean_comment(body):
    """The text of a comment's body: the leading ' * ' gone, indentation after it
    (lists, examples) and blank lines (paragraphs) kept."""
    out = []
    for ln in body.split("\n"):
        m = re.match(r"^\s*\*(?!/) ?(.*)$", ln)
        out.append((m.group(1) if m else ln.strip()).rstrip())
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def collapse(text):
    return re.sub(r"\s+", " ", text).strip()


def strip_comments(code):
    return re.sub(r"/\*.*?\*/", " ", code, flags=re.S)


def split_top(text, sep):
    """Splits `text` at `sep` outside parentheses and braces."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def param_name(decl):
    """The declared name in a parameter or member declaration."""
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)  # a function pointer
    if m:
        return m.group(1)
    decl = re.sub(r"\[[^\]]*\]\s*$", "", decl.strip())
    names = IDENT.findall(decl)
    return names[-1] if names else ""


def parse_params(text):
    text = collapse(text)
    if text in ("", "void"):
        return []
    out = []
    for p in split_top(text, ","):
        p = p.strip()
        name = param_name(p)
        typ = p[: p.rfind(name)].strip() if name else p
        out.append((typ, name))
    return out


def parse_members(body, is_enum):
    """Members of a struct or enum body, each with its doc comment."""
    members, pending, note = [], "", ""
    i, n, cur = 0, len(body), []
    sep = "," if is_enum else ";"
    depth = 0

    def flush():
        nonlocal cur, pending, note
        decl = collapse("".join(cur))
        cur = []
        if decl:
            name = decl.split("=")[0].strip() if is_enum else param_name(decl)
            members.append(Member(decl, name, pending, note))
        pending, note = "", ""

    while i < n:
        if body.startswith("/**<", i):
            j = body.index("*/", i)
            text = clean_comment(body[i + 4 : j])
            if collapse("".join(cur)):  # an enum's last value has no comma
                flush()
            if members:
                m = members[-1]
                m.doc = (m.doc + "\n" + text).strip() if m.doc else text
            i = j + 2
        elif body.startswith("/**", i):
            j = body.index("*/", i)
            pending = clean_comment(body[i + 3 : j])
            i = j + 2
        elif body.startswith("/*", i):
            j = body.index("*/", i)
            note = clean_comment(body[i + 2 : j])
            i = j + 2
        else:
            ch = body[i]
            if ch in "({":
                depth += 1
            elif ch in ")}":
                depth -= 1
            if ch == sep and depth == 0:
                flush()
            else:
                cur.append(ch)
            i += 1
    flush()
    return members


def classify(code, doc, header):
    """An Item for one top-level declaration (comments inside kept for members)."""
    flat = collapse(strip_comments(code))
    m = re.match(r"DISTC_EXTERN\((.*?)\)\s*(\w+)\s*\((.*)\)\s*;?$", flat, re.S)
    if m:
        return Item("function", m.group(2), header, doc, flat, ret=collapse(m.group(1)),
                    params=parse_params(m.group(3)))
    m = re.match(r"typedef\s+(struct|enum)\s+(\w+)\s*\{", code.lstrip())
    if m:
        body = code[code.index("{") + 1 : code.rindex("}")]
        kind = m.group(1)
        return Item(kind, m.group(2), header, doc, flat, members=parse_members(body, kind == "enum"))
    m = re.match(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;$", flat)
    if m:
        return Item("opaque", m.group(2), header, doc, flat)
    m = re.match(r"typedef\s+(.*?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)\s*;$", flat)
    if m:
        return Item("callback", m.group(2), header, doc, flat, ret=m.group(1).strip(),
                    params=parse_params(m.group(3)))
    return None


def parse_header(text, path):
    hdr = Header(path)
    i, n, pending = 0, len(text), ""
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("/**", i) and not text.startswith("/**<", i):
            j = text.index("*/", i)
            pending = clean_comment(text[i + 3 : j])
            if pending.startswith("@file"):
                lines = pending.split("\n")[1:]
                body = "\n".join(lines)
                m = re.match(r"\s*@brief\s+(.*?)(\n\s*\n|$)", body, re.S)
                if m:
                    hdr.brief = collapse(m.group(1))
                    body = body[m.end() :]
                hdr.doc = body.strip("\n")
                pending = ""
            i = j + 2
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif text.startswith("//", i):
            e = text.find("\n", i)
            i = n if e < 0 else e
        elif text[i] == "#":
            j = i
            while True:
                e = text.find("\n", j)
                e = n if e < 0 else e
                if text[j:e].rstrip().endswith("\\"):
                    j = e + 1
                    continue
                break
            line = collapse(text[i:e].replace("\\\n", " "))
            m = re.match(r"#\s*define\s+(\w+)(\([^)]*\))?\s*(.*)$", line)
            if m and not m.group(1).endswith("_H") and not m.group(1).startswith("DISTC_EXTERN"):
                hdr.items.append(Item("macro", m.group(1) + (m.group(2) or ""), path, pending, line,
                                      value=m.group(3)))
            pending = ""
            i = e
        else:
            m = IDENT.match(text, i)
            if m and m.group(0) in ("DISTC_BEGIN_DECL", "DISTC_END_DECL"):
                i = m.end()
                continue
            # Up to the ';' outside braces and parentheses, skipping comments.
            j, depth = i, 0
            while j < n:
                if text.startswith("/*", j):
                    j = text.index("*/", j) + 2
                    continue
                ch = text[j]
                if ch in "({":
                    depth += 1
                elif ch in ")}":
                    depth -= 1
                elif ch == ";" and depth == 0:
                    break
                j += 1
            item = classify(text[i : j + 1], pending, path)
            if item:
                hdr.items.append(item)
            pending = ""
            i = j + 1
    return hdr


def parse_all(include_dir, paths):
    """Parses include_dir/<path> for each path; returns [Header] in that order."""
    out = []
    for p in paths:
        with open(f"{include_dir}/{p}", encoding="utf-8") as f:
            out.append(parse_header(f.read(), p))
    return out
