#!/usr/bin/env python3
"""check-llama-h.py - compares this project's llama.h with llama.cpp's, declaration by declaration.

    tools/check-llama-h.py /path/to/llama.cpp/include/llama.h [--ours src/llama.h] [-v]

For every function both headers declare (LLAMA_API ..., deprecated ones included) it compares the
return type and the parameter types in order (parameter names aside; `struct`/`enum` keywords
aside, since both headers are C). For every struct both define it compares the fields (names,
types, order), for every enum the enumerators and their values, for every typedef and macro the
definition. It then lists what llama.cpp declares that this header lacks, and what this header
adds. Exit status 1 when a shared declaration differs (what would break a program written for
llama.cpp), 0 otherwise. Python 3 standard library only; not run in CI (CI has no llama.cpp).
"""

import argparse
import os
import re
import sys

TYPE_WORDS = {"void", "bool", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "const",
              "struct", "enum", "union"}


# ---- reading a header ----------------------------------------------------------------------
def mark_sections(text):
    """Section banners (`//`, `// Title`, `//` after a line that is no comment, as llama.cpp's
    header has them) become `__SECTION__ Title;` statements."""
    lines = text.split("\n")
    for i in range(len(lines) - 2):
        m = re.match(r"\s*//\s+([A-Z][\w /-]*?)\s*$", lines[i + 1])
        if m and lines[i].strip() == "//" and lines[i + 2].strip() == "//" and \
                (i == 0 or not lines[i - 1].strip().startswith("//")):
            lines[i] = "__SECTION__ %s;" % m.group(1)
            lines[i + 1] = lines[i + 2] = ""
    return "\n".join(lines)


def strip_comments(text):
    """Removes // and /* */ comments, leaving string and character literals alone."""
    text = mark_sections(text)
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def preprocess(text):
    """Comment-free text without preprocessor lines, and the object-like macros it defines."""
    text = strip_comments(text)
    text = re.sub(r"\\\n", " ", text)
    macros, lines = {}, []
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("#"):
            m = re.match(r"#\s*define\s+([A-Za-z_]\w*)(\s+(.*))?$", s)
            if m and not s[m.end(1):].startswith("("):
                macros[m.group(1)] = (m.group(3) or "").strip()
            continue
        lines.append(line)
    text = "\n".join(lines)
    text = re.sub(r'extern\s+"C"\s*\{', " ", text)
    return text, macros


def statements(text):
    """Top-level statements (split at ';' outside braces and parentheses), whitespace collapsed."""
    out, cur, depth = [], [], 0
    for c in text:
        if c in "{(":
            depth += 1
        elif c in "})":
            depth -= 1
            if depth < 0:  # the closing brace of extern "C"
                depth = 0
                continue
        if c == ";" and depth == 0:
            out.append(" ".join("".join(cur).split()))
            cur = []
        else:
            cur.append(c)
    return [s for s in out if s]


def tokens(text):
    return re.findall(r"[A-Za-z_]\w*|\d+\w*|\S", text)


def matching(text, start):
    """Index of the bracket closing the one at text[start]."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    open_c, close_c, depth = text[start], pairs[text[start]], 0
    for i in range(start, len(text)):
        if text[i] == open_c:
            depth += 1
        elif text[i] == close_c:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced: " + text[start:start + 80])


def split_top(text, sep=","):
    parts, cur, depth = [], [], 0
    for c in text:
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def norm_type(text):
    """A type as compared: tokens joined by spaces, without struct/enum keywords."""
    return " ".join(t for t in tokens(text) if t not in ("struct", "enum"))


def param_type(param):
    """The type of one parameter, its name dropped (function pointers included)."""
    param = param.strip()
    m = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)?\s*\)", param)
    if m:  # a function pointer: ret (*name)(params)
        rest = param[m.end():].strip()
        inner = rest[1:matching(rest, 0)] if rest.startswith("(") else ""
        return "%s (*)(%s)" % (norm_type(param[:m.start()]), ", ".join(param_types(inner)))
    toks = tokens(param)
    if len(toks) > 1 and re.match(r"[A-Za-z_]\w*$", toks[-1]) and toks[-1] not in TYPE_WORDS \
            and toks[-2] not in ("struct", "enum", "union"):
        toks = toks[:-1]
    return norm_type(" ".join(toks))


def param_types(plist):
    params = split_top(plist)
    if params in ([], ["void"]):
        return []
    return [param_type(p) for p in params]


class Header:
    def __init__(self, path):
        self.path = path
        text, self.macros = preprocess(open(path, encoding="utf-8").read())
        self.functions = {}   # name -> (return type, [param types], deprecated, section)
        self.structs = {}     # name -> [(field name, type)] (None: declared only)
        self.enums = {}       # name -> [(enumerator, value text)]
        self.typedefs = {}    # name -> normalized definition
        self.order = []       # function names in header order
        section = "(top)"
        for st in statements(text):
            if st.startswith("__SECTION__"):
                section = st[len("__SECTION__"):].strip()
            elif "LLAMA_API" in st:
                self._function(st, section)
            elif re.match(r"(typedef\s+)?(struct|union)\s+\w*\s*\{", st):
                self._struct(st)
            elif re.match(r"(typedef\s+)?enum\s+\w+\s*\{", st):
                self._enum(st)
            elif re.match(r"struct\s+\w+$", st):
                self.structs.setdefault(st.split()[1], None)
            elif st.startswith("typedef"):
                self._typedef(st)
            elif re.match(r"[\w\s*]+\b[A-Za-z_]\w*\s*\(.*\)$", st):
                self._function(st, section)  # a header without LLAMA_API markers

    def _function(self, st, section):
        deprecated = "DEPRECATED" in st
        if deprecated:
            i = st.index("DEPRECATED")
            j = st.index("(", i)
            inner = st[j + 1:matching(st, j)]
            decl = split_top(inner)[0]
            st = (st[:i] + " " + decl).strip()
        st = st.replace("LLAMA_API", " ").strip()
        close = st.rstrip().rfind(")")
        open_ = close
        depth = 0
        for k in range(close, -1, -1):
            if st[k] == ")":
                depth += 1
            elif st[k] == "(":
                depth -= 1
                if depth == 0:
                    open_ = k
                    break
        head, plist = st[:open_].strip(), st[open_ + 1:close]
        m = re.search(r"([A-Za-z_]\w*)\s*$", head)
        name, ret = m.group(1), norm_type(head[:m.start()])
        self.functions[name] = (ret, param_types(plist), deprecated, section)
        self.order.append(name)

    def _fields(self, body):
        fields = []
        for f in split_top(body, ";"):
            f = f.strip()
            if not f:
                continue
            if re.match(r"(struct|union)\s*\{", f):  # an anonymous struct or union
                kind = f.split("{")[0].strip()
                inner = f[f.index("{") + 1:matching(f, f.index("{"))]
                fields += [(n, "(%s) %s" % (kind, t)) for n, t in self._fields(inner)]
                continue
            m = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", f)
            if m:
                fields.append((m.group(1), param_type(f)))
                continue
            m = re.match(r"(.*?)([A-Za-z_]\w*)\s*((\[[^\]]*\]\s*)*)$", f)
            fields.append((m.group(2), norm_type(m.group(1)) + ("" if not m.group(3) else " " + norm_type(m.group(3)))))
        return fields

    def _struct(self, st):
        m = re.match(r"(typedef\s+)?(struct|union)\s+(\w*)\s*\{", st)
        brace = st.index("{")
        end = matching(st, brace)
        name = m.group(3) or st[end + 1:].strip()
        self.structs[name] = self._fields(st[brace + 1:end])

    def _enum(self, st):
        m = re.match(r"(typedef\s+)?enum\s+(\w+)\s*\{", st)
        brace = st.index("{")
        body = st[brace + 1:matching(st, brace)]
        items = []
        for e in split_top(body):
            if e:
                name, _, value = e.partition("=")
                items.append((name.strip(), value.strip() or None))
        self.enums[m.group(2)] = items

    def _typedef(self, st):
        m = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", st)
        if m:
            self.typedefs[m.group(1)] = param_type(st[len("typedef"):])
            return
        toks = tokens(st)
        self.typedefs[toks[-1]] = norm_type(" ".join(toks[1:-1]))


# ---- values of enumerators ------------------------------------------------------------------
def ggml_macros(llama_h):
    """Macros of the ggml.h that sits beside llama.h (ours: ../../ggml/include, llama.cpp's:
    ../ggml/include), for enumerator values such as GGML_ROPE_TYPE_NEOX."""
    here = os.path.dirname(os.path.abspath(llama_h))
    for cand in (os.path.join(here, "ggml.h"), os.path.join(here, "..", "ggml", "include", "ggml.h")):
        if os.path.exists(cand):
            return preprocess(open(cand, encoding="utf-8").read())[1]
    return {}


def enum_values(items, symbols):
    """Enumerator -> integer (None where an expression cannot be evaluated)."""
    values, nxt = {}, 0
    for name, expr in items:
        if expr is None:
            v = nxt
        else:
            text = expr
            for _ in range(8):  # expand names (enumerators and macros) a few levels deep
                text = re.sub(r"[A-Za-z_]\w*", lambda m: str(values.get(m.group(0), symbols.get(m.group(0), m.group(0)))), text)
            text = re.sub(r"(?<=\d)[uUlL]+\b", "", text)
            try:
                v = eval(text, {"__builtins__": {}}, {}) if re.fullmatch(r"[\d\s()+\-*/<>|&~x]+", text) else None
            except Exception:
                v = None
        values[name] = v
        nxt = (v + 1) if isinstance(v, int) else None
    return values


# ---- comparing -------------------------------------------------------------------------------
def fmt_fn(name, f):
    return "%s %s(%s)" % (f[0], name, ", ".join(f[1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("theirs", help="llama.cpp's include/llama.h")
    ap.add_argument("--ours", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "llama.h"))
    ap.add_argument("-v", "--verbose", action="store_true", help="also list every matching declaration")
    args = ap.parse_args()

    theirs, ours = Header(args.theirs), Header(args.ours)
    errors = 0

    def section(title):
        print("\n== " + title)

    print("llama.cpp: %s: %d functions (%d deprecated), %d structs, %d enums" % (
        args.theirs, len(theirs.functions), sum(1 for f in theirs.functions.values() if f[2]),
        sum(1 for s in theirs.structs.values() if s is not None), len(theirs.enums)))
    print("ours:      %s: %d functions (%d deprecated), %d structs, %d enums" % (
        os.path.relpath(args.ours), len(ours.functions), sum(1 for f in ours.functions.values() if f[2]),
        sum(1 for s in ours.structs.values() if s is not None), len(ours.enums)))

    # Functions.
    shared = [n for n in theirs.order if n in ours.functions]
    section("functions declared by both: %d" % len(shared))
    n_diff = 0
    for name in shared:
        t, o = theirs.functions[name], ours.functions[name]
        if (t[0], t[1]) != (o[0], o[1]):
            n_diff += 1
            print("  DIFFERS  %s\n     ours: %s" % (fmt_fn(name, t), fmt_fn(name, o)))
        elif args.verbose:
            print("  same     %s" % fmt_fn(name, t))
        if t[2] != o[2]:
            print("  note     %s is %sdeprecated in llama.cpp, %sdeprecated here" % (
                name, "" if t[2] else "not ", "" if o[2] else "not "))
    print("  %d differ" % n_diff)
    errors += n_diff

    # Structs.
    section("structs")
    for name, tf in theirs.structs.items():
        of = ours.structs.get(name, "absent")
        if tf is None:
            continue
        if of == "absent":
            continue  # listed below
        if of is None:
            print("  DIFFERS  struct %s: defined by llama.cpp, only declared here" % name)
            errors += 1
            continue
        tmap, omap = dict(tf), dict(of)
        problems = []
        for fname, ftype in tf:
            if fname not in omap:
                problems.append("missing field %s %s" % (ftype, fname))
            elif omap[fname] != ftype:
                problems.append("field %s: %s, ours %s" % (fname, ftype, omap[fname]))
        extra = [f for f, _ in of if f not in tmap]
        common_t = [f for f, _ in tf if f in omap]
        common_o = [f for f, _ in of if f in tmap]
        if problems:
            errors += 1
            print("  DIFFERS  struct %s:\n           %s" % (name, "\n           ".join(problems)))
        else:
            status = "same fields" if not extra else "same fields, plus ours: " + ", ".join(extra)
            order = "" if common_t == common_o else " (in another order)"
            trailing = extra and [f for f, _ in of][-len(extra):] == extra
            if extra and not trailing:
                order += " (our extra fields are not last)"
            print("  ok       struct %s: %s%s" % (name, status, order))
    for name, of in ours.structs.items():
        if of is not None and theirs.structs.get(name) is None and name in theirs.structs:
            print("  note     struct %s: opaque in llama.cpp, defined here" % name)

    # Enums.
    section("enums")
    tsym, osym = dict(ggml_macros(args.theirs)), dict(ggml_macros(args.ours))
    tsym.update(theirs.macros)
    osym.update(ours.macros)
    for name, titems in theirs.enums.items():
        if name not in ours.enums:
            continue
        tv, ov = enum_values(titems, tsym), enum_values(ours.enums[name], osym)
        problems = []
        for e, v in tv.items():
            if e not in ov:
                problems.append("missing %s = %s" % (e, v))
            elif ov[e] != v or v is None:
                problems.append("%s = %s, ours %s" % (e, v, ov[e]))
        extra = [e for e in ov if e not in tv]
        if problems:
            errors += 1
            print("  DIFFERS  enum %s: %s" % (name, "; ".join(problems)))
        else:
            print("  ok       enum %s: %d values%s" % (name, len(tv), ", plus ours: " + ", ".join(extra) if extra else ""))

    # Typedefs and macros.
    section("typedefs and macros")
    for name, tdef in theirs.typedefs.items():
        if name in ours.typedefs:
            if ours.typedefs[name] != tdef:
                errors += 1
                print("  DIFFERS  typedef %s: %s, ours %s" % (name, tdef, ours.typedefs[name]))
            elif args.verbose:
                print("  same     typedef %s" % name)
    skip = {"LLAMA_H", "LLAMA_API", "DEPRECATED"}
    for name, value in theirs.macros.items():
        if name in skip or name not in ours.macros:
            continue
        if " ".join(tokens(value)) != " ".join(tokens(ours.macros[name])):
            errors += 1
            print("  DIFFERS  #define %s %s, ours %s" % (name, value, ours.macros[name]))
        else:
            print("  ok       #define %s %s" % (name, value))

    # What llama.cpp has and we lack.
    section("declared by llama.cpp, absent here")
    by_section = {}
    for name in theirs.order:
        if name not in ours.functions:
            by_section.setdefault(theirs.functions[name][3], []).append(name + (" (deprecated)" if theirs.functions[name][2] else ""))
    for sec, names in by_section.items():
        print("  functions, %s (%d): %s" % (sec, len(names), ", ".join(names)))
    lacking = [n for n, s in theirs.structs.items() if s is not None and n not in ours.structs]
    if lacking:
        print("  structs: " + ", ".join(lacking))
    lacking = [n for n in theirs.enums if n not in ours.enums]
    if lacking:
        print("  enums: " + ", ".join(lacking))
    lacking = [n for n in theirs.typedefs if n not in ours.typedefs]
    if lacking:
        print("  typedefs: " + ", ".join(lacking))
    lacking = [n for n in theirs.macros if n not in ours.macros and n not in skip and not n.startswith("LLAMA_API")]
    if lacking:
        print("  macros: " + ", ".join(lacking))

    section("declared here only")
    print("  functions: " + (", ".join(n for n in ours.order if n not in theirs.functions) or "none"))
    only = [n for n, s in ours.structs.items() if s is not None and n not in theirs.structs]
    if only:
        print("  structs: " + ", ".join(only))
    only = [n for n in ours.enums if n not in theirs.enums]
    if only:
        print("  enums: " + ", ".join(only))

    print("\n%s" % ("OK: every shared declaration matches llama.cpp's" if errors == 0 else
                    "%d shared declarations differ from llama.cpp's" % errors))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
