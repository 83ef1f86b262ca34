#!/usr/bin/env python3
"""Generates bindings/julia/Distc/src/LibDistc.jl from SWIG's XML parse tree
of include/distc.h (`swig -xml`): no hand-written C parser, one source.

    julia_gen.py [--check]      (--check: fail on any difference from the committed file)
    julia_gen.py --complete LIB (every distc_* function LIB exports has a wrapper, and no more)
    julia_gen.py --calls FILE.jl (every LibDistc function and struct FILE calls as L.name(...) gets
                                  as many arguments as it takes: the Julia layer cannot run here)

From the tree it emits: every #define constant and enum value as a Julia
const; every struct as an isbits `struct` with the same fields in the same
order (so layouts match); opaque handles as empty structs for Ptr{...}; and
one wrapper per public function: a `ccall` with the C types, whose int
status is checked (a negative code throws DistcError with distc_error_last()).
DLPack's three structs come from its spec (its header is outside the tree).
"""
import os
import re
import subprocess
import sys

from swig_tree import ROOT, attrs, full_type, parms, parse_header, write_or_check

OUT = os.path.join(ROOT, "bindings", "julia", "Distc", "src", "LibDistc.jl")

BASE = {
    "void": "Cvoid", "char": "Cchar", "int": "Cint", "unsigned int": "Cuint", "double": "Cdouble",
    "size_t": "Csize_t", "int8_t": "Int8", "uint8_t": "UInt8", "int16_t": "Int16", "uint16_t": "UInt16",
    "int32_t": "Int32", "uint32_t": "UInt32", "int64_t": "Int64", "uint64_t": "UInt64",
    "DLTensor": "DLTensor", "DLDevice": "DLDevice", "DLDataType": "DLDataType",
}
# Functions whose int is data, not a status to check.
UNCHECKED = {"distc_error_last_code", "distc_error_set"}

DLPACK = '''
# DLPack (its header is outside SWIG's tree; the layout is fixed by the DLPack spec).
struct DLDevice
    device_type::Cint
    device_id::Cint
end

struct DLDataType
    code::UInt8
    bits::UInt8
    lanes::UInt16
end

struct DLTensor
    data::Ptr{Cvoid}
    device::DLDevice
    ndim::Cint
    dtype::DLDataType
    shape::Ptr{Int64}
    strides::Ptr{Int64}
    byte_offset::UInt64
end

const kDLCPU = Cint(1)
const kDLCUDA = Cint(2)
const kDLInt = UInt8(0)
const kDLUInt = UInt8(1)
const kDLFloat = UInt8(2)
const kDLBfloat = UInt8(4)
const kDLComplex = UInt8(5)
const kDLBool = UInt8(6)
'''


class Types:
    def __init__(self, root):
        self.structs, self.opaque, self.enums, self.fnptrs = set(), set(), set(), set()
        for c in root.iter("class"):
            a = attrs(c)
            (self.structs if c.findall("cdecl") else self.opaque).add(a["name"])
        for e in root.iter("enum"):
            a = attrs(e)
            for k in ("name", "tdname", "sym:name"):
                if a.get(k):
                    self.enums.add(a[k])
        for c in root.iter("cdecl"):
            a = attrs(c)
            if a.get("kind") == "typedef":
                if a.get("decl", "").startswith("p.f("):
                    self.fnptrs.add(a["name"])
                elif a.get("type", "").startswith("enum "):
                    self.enums.add(a["name"])
                elif a.get("type", "").startswith("struct ") and a["name"] not in self.structs:
                    self.opaque.add(a["name"])  # typedef struct x x; with no body here

    def julia(self, swig_type, role="field"):
        """A SWIG type string (decl + type, e.g. "p.q(const).char") as a Julia type."""
        t = swig_type.replace("q(const).", "")
        m = re.match(r"a\((\d+)\)\.(.*)", t)
        if m:
            return f"NTuple{{{m.group(1)}, {self.julia(m.group(2), role)}}}"
        if t.startswith("p."):
            inner = t[2:]
            if inner == "char" and role in ("param", "return"):
                return "Cstring"
            if inner.startswith("f(") or inner in self.fnptrs:
                return "Ptr{Cvoid}"
            return f"Ptr{{{self.julia(inner, 'pointee')}}}"
        if t.startswith("f("):
            return "Ptr{Cvoid}"
        t = t.replace("struct ", "").replace("enum ", "")
        if t in BASE:
            return BASE[t]
        if t in self.enums:
            return "Cint"
        if t in self.fnptrs:
            return "Ptr{Cvoid}"
        if t in self.structs or t in self.opaque:
            return t
        raise SystemExit(f"julia_gen: no Julia type for SWIG type {swig_type!r}")


def close_paren(s, start):
    """The index of the ")" closing the "(" before `start` (types nest: function pointers)."""
    depth = 1
    for i in range(start, len(s)):
        depth += {"(": 1, ")": -1}.get(s[i], 0)
        if depth == 0:
            return i
    raise SystemExit(f"julia_gen: unbalanced declaration {s!r}")


CASTS = {"uint64_t": "UInt64", "int64_t": "Int64", "uint32_t": "UInt32", "int32_t": "Int32"}


def julia_const(a):
    """A #define's C expression as Julia: casts become conversions, unsigned suffixes UInt32."""
    v, t = a.get("value", ""), a.get("type", "")
    if "char" in t:
        return '"' + v + '"'
    v = re.sub(r"\((u?int\d+_t)\)\s*(\w+)", lambda m: f"{CASTS[m.group(1)]}({m.group(2)})", v)
    v = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uU]\b", r"UInt32(\1)", v)
    return v


def generate():
    root = parse_header()
    types = Types(root)
    out = ['# Generated by bindings/gen/julia_gen.py from SWIG\'s XML parse tree of include/distc.h: do not edit.',
           '# Raw ccall wrappers, one per public function; the idiomatic layer is Distc.jl.',
           'module LibDistc', '',
           '# The library: $DISTC_LIB when the module is loaded (precompiled), else libdistc from the loader path.',
           'const libdistc = get(ENV, "DISTC_LIB", "libdistc.so.0")', '',
           '"""A failed call: the C status code and the library\'s message (it names the function and argument)."""',
           'struct DistcError <: Exception', '    code::Cint', '    msg::String', 'end',
           'Base.showerror(io::IO, e::DistcError) = print(io, "DistcError(", e.code, "): ", e.msg)', '',
           'function check(rc::Cint)',
           '    rc < 0 && throw(DistcError(rc, unsafe_string(ccall((:distc_error_last, libdistc), Cstring, ()))))',
           '    return rc', 'end', DLPACK, '# ---- constants']
    seen = set()
    for c in root.iter("constant"):
        a = attrs(c)
        if a["name"] in seen:
            continue
        seen.add(a["name"])
        out.append(f"const {a['name']} = {julia_const(a)}")
    out.append("")
    out.append("# ---- enums (plain constants: a value the library adds later stays representable)")
    for e in root.iter("enum"):
        prev = -1
        for it in e.iter("enumitem"):
            b = attrs(it)
            v = b.get("enumvalue")
            val = int(v) if v not in (None, "") else prev + 1
            prev = val
            out.append(f"const {b['name']} = Cint({val})")
    out.append("")
    out.append("# ---- handles (opaque) and structs (same fields, same order: same layout)")
    for name in sorted(types.opaque):
        out.append(f"struct {name} end")
    for c in root.iter("class"):
        a = attrs(c)
        fields = c.findall("cdecl")
        if not fields:
            continue
        out.append(f"struct {a['name']}")
        for f in fields:
            fa = attrs(f)
            out.append(f"    {fa['name']}::{types.julia(full_type(fa))}")
        out.append("end")
    out.append("")
    out.append("# ---- functions")
    names = []
    for c in root.iter("cdecl"):
        a = attrs(c)
        if a.get("kind") != "function":
            continue
        name = a["name"]
        names.append(name)
        decl = a["decl"]  # f(...).[p.]
        ret_decl = decl[close_paren(decl, 2) + 2:]  # decl is "f(<parameters>).<return decl>"
        ret = types.julia(ret_decl + a["type"], "return")
        ps = [p for p in parms(c) if not (p.get("type") == "void" and not p.get("name"))]
        pnames = [p.get("name") or f"arg{i}" for i, p in enumerate(ps)]
        pnames = [n + "_" if n in ("out", "end", "function", "type", "module") else n for n in pnames]
        ptypes = [types.julia(p["type"], "param") for p in ps]
        tup = "(" + ", ".join(ptypes) + ("," if len(ptypes) == 1 else "") + ")"
        call = f"ccall((:{name}, libdistc), {ret}, {tup}{''.join(', ' + n for n in pnames)})"
        sig = ", ".join(pnames)
        if ret == "Cint" and name not in UNCHECKED:
            body = f"check({call})"
        elif ret == "Cstring":
            body = f"unsafe_string({call})"
        else:
            body = call
        out.append(f"{name}({sig}) = {body}")
    out.append("")
    out.append("# Every function of the header, for the completeness test.")
    out.append("const FUNCTIONS = [" + ", ".join(":" + n for n in names) + "]")
    out.append("")
    out.append("end # module")
    return "\n".join(out) + "\n", names


def complete(lib):
    """The wrappers in the committed file against the functions the library exports."""
    nm = subprocess.run(["nm", "-D", "--defined-only", lib], stdout=subprocess.PIPE, universal_newlines=True,
                        check=True).stdout
    exported = {line.split()[-1].split("@")[0] for line in nm.splitlines() if re.search(r" T distc_", line)}
    wrapped = set(re.findall(r"^(distc_\w+)\(.*\) = ", open(OUT).read(), re.M))
    missing, extra = sorted(exported - wrapped), sorted(wrapped - exported)
    if missing or extra:
        sys.exit(f"julia_gen: wrappers missing for {missing}; wrappers of no exported function: {extra}")
    print(f"julia_gen: all {len(exported)} exported functions have a wrapper")


def arities(text):
    """{name: argument count} of the generated wrappers and struct constructors."""
    out = {m.group(1): len([a for a in m.group(2).split(",") if a.strip()])
           for m in re.finditer(r"^(distc_\w+)\((.*?)\) = ", text, re.M)}
    for m in re.finditer(r"^struct (\w+)\n((?:    \w+::.*\n)*)end", text, re.M):
        out[m.group(1)] = len(m.group(2).splitlines())
    return out


def call_args(text, start):
    """The number of top-level arguments of the call whose "(" is at `start`."""
    depth, n, empty, i = 0, 1, True, start
    while i < len(text):
        c = text[i]
        if c == '"':
            i = text.index('"', i + 1)
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return 0 if empty else n
        elif c == "," and depth == 1:
            n += 1
        elif depth >= 1 and not c.isspace():
            empty = False
        i += 1
    raise SystemExit("julia_gen: unbalanced call")


def calls(path):
    known = arities(open(OUT).read())
    text = open(path).read()
    bad, seen = [], 0
    for m in re.finditer(r"\bL\.(\w+)\(", text):
        name = m.group(1)
        if name not in known:
            continue
        seen += 1
        got = call_args(text, m.end() - 1)
        if got != known[name]:
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path}:{line}: L.{name} takes {known[name]} arguments, called with {got}")
    if bad:
        sys.exit("\n".join(bad))
    print(f"julia_gen: {seen} calls into LibDistc in {os.path.basename(path)} have the right number of arguments")


def main():
    if sys.argv[1:2] == ["--complete"]:
        return complete(sys.argv[2])
    if sys.argv[1:2] == ["--calls"]:
        return calls(sys.argv[2])
    text, names = generate()
    write_or_check(OUT, text, "julia_gen", f"{len(names)} functions", "--check" in sys.argv[1:])

if __name__ == "__main__":
    main()
