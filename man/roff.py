"""Turns the headers' comment text into man(7) roff that mandoc lints clean.

Comments are plain text with a few conventions: `code` in backticks,
paragraphs separated by blank lines, "- " and "1. " list items with
indented continuation lines, and examples indented by two spaces or more.
"""

import re

NON_ASCII = {"\u2014": "\\(em", "\u2013": "\\(en", "\u00d7": "\\(mu", "\u2019": "'", "\u2018": "'",
             "\u201c": '"', "\u201d": '"', "\u2026": "...", "\u2192": "\\(->", "\u2264": "\\(<=",
             "\u2265": "\\(>="}
PARAGRAPH = (".PP", ".P", ".LP")
ENDS_PARAGRAPH = PARAGRAPH + (".SH", ".SS", ".TP", ".IP", ".RE")


def esc(s, code=False):
    """One piece of text for roff: backslashes, non-ASCII and minus signs escaped.
    A '-' is a minus sign (\\-) in code and wherever it is not a word's hyphen."""
    s = s.replace("\\", "\\e")
    s = "".join(NON_ASCII.get(c, c) if ord(c) < 0x80 or c in NON_ASCII else f"\\[u{ord(c):04X}]" for c in s)
    if code:
        return s.replace("-", "\\-")
    return re.sub(r"(?<![A-Za-z0-9])-|-(?![A-Za-z0-9])", r"\\-", s)


def line_safe(line):
    """A text line roff will not read as a request: no leading '.', "'" or space."""
    line = line.strip()
    return "\\&" + line if line[:1] in (".", "'") else line


def code(line):
    """A line of an example (no-fill): indentation kept."""
    s = esc(line.rstrip(), code=True)
    return "\\&" + s if s[:1] in (".", "'") else s


def first_sentence(text):
    """The first sentence of a comment, for a page's NAME line."""
    text = re.sub(r"\s+", " ", text.replace("`", "")).strip()
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] == " ") and text[i - 2 : i] != "..":
            return text[:i]
    return text.rstrip(".")


def see_also(refs):
    out = []
    for i, (name, sec) in enumerate(refs):
        out.append(f".BR {name} ({sec}){',' if i + 1 < len(refs) else ''}")
    return out


def tidy(lines):
    """Drops paragraph macros that do nothing (after a heading, before another
    paragraph or heading, at the end): mandoc warns about each."""
    out = []
    for i, ln in enumerate(lines):
        if ln in PARAGRAPH:
            prev = out[-1] if out else ""
            nxt = next((n for n in lines[i + 1 :] if not n.startswith('.\\"')), "")
            if prev.startswith((".SH", ".SS", ".TH")) or prev in PARAGRAPH or not nxt or \
                    nxt.split(" ")[0] in ENDS_PARAGRAPH:
                continue
        out.append(ln)
    return out


class Roff:
    def __init__(self, functions):
        self.functions = functions

    def esc(self, s):
        return esc(s)

    def _prose(self, s):
        s = esc(s)
        s = re.sub(r"\b(distc_\w+)(\(\))?",
                   lambda m: f"\\fB{m.group(1)}\\fR{m.group(2) or ''}" if m.group(1) in self.functions else m.group(0),
                   s)
        return re.sub(r"\bDISTC_[A-Z0-9_]+\b", lambda m: f"\\fB{m.group(0)}\\fR", s)

    def inline(self, text):
        """Filled text: lines kept, `code` in bold, functions and constants in bold."""
        parts = re.split(r"`([^`]*)`", text)
        s = "".join(self._prose(p) if i % 2 == 0 else "\\fB" + esc(p.replace("\n", " "), code=True) + "\\fR"
                    for i, p in enumerate(parts))
        return [line_safe(ln) for ln in s.split("\n") if ln.strip()]

    def blocks(self, text):
        """Paragraphs, lists and examples of a comment."""
        out = []
        for para in re.split(r"\n\s*\n", text.strip("\n")):
            lines = para.split("\n")
            if all(ln.startswith("  ") for ln in lines) and not re.match(r"\s*(- |\d+\. )", lines[0]):
                indent = min(len(ln) - len(ln.lstrip()) for ln in lines if ln.strip())
                out += [".PP", ".RS 4", ".EX"] + [code(ln[indent:]) for ln in lines] + [".EE", ".RE"]
                continue
            out.append(".PP")
            buf, in_list = [], False
            for ln in lines:
                m = re.match(r"^(- |(\d+)\. )(.*)$", ln)
                if m:
                    out += self.inline("\n".join(buf))
                    out.append('.IP \\(bu 2' if m.group(1) == "- " else f".IP {m.group(2)}. 4")
                    buf, in_list = [m.group(3)], True
                elif in_list and ln.startswith(" "):
                    buf.append(ln.strip())
                else:
                    if in_list:
                        out += self.inline("\n".join(buf)) + [".PP"]
                        buf, in_list = [], False
                    buf.append(ln)
            out += self.inline("\n".join(buf))
        return out
