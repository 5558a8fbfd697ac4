#!/usr/bin/env python3
"""The shape of a Rust crate's production code: file-level import circles
and files too long to read.

Usage: structure.py [--rooms] CRATE_DIR...
--rooms prints, per crate, each top-level module (a room) and the rooms
its files use, bottom-up, instead of checking.
Exit 1 when any crate has a circle or a production file longer than
MAX_LINES (lines outside `#[cfg(test)]` items, comments included).

Each file under src/ is a module (src/a/b.rs and src/a/b/mod.rs are
`a::b`; lib.rs and main.rs the root; src/bin/* are roots of their own and
skipped). An edge A -> B is a path in A's production code (`use` lines and
inline `crate::`/`super::`/`self::` paths; `#[cfg(test)]` items removed)
that names an item of B, following `pub use` re-exports to the file that
defines the item. A module owns its children: a path from a module into
its own descendants (a declaration, a re-export, a call) is not an edge; a
child naming its parent is. A circle is a
strongly connected component of two or more files.
"""
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MAX_LINES = 600


def strip_comments_and_strings(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            out.append('""')
            i = n if j < 0 else j + len(end)
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", src[i:])
            out.append("' '")
            i += len(m.group(0))
        elif c == "'" and re.match(r"'\\u\{[0-9a-fA-F]+\}'", src[i:i + 12]):
            m = re.match(r"'\\u\{[0-9a-fA-F]+\}'", src[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_cfg_test(src):
    """Remove every item that follows #[cfg(test)] (a `mod x;` or a braced item)."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", src)
        if not m:
            return src
        i = m.end()
        # the item runs to the first `;` before any `{`, or to the matching `}`
        semi, brace = src.find(";", i), src.find("{", i)
        if brace < 0 or (0 <= semi < brace):
            src = src[:m.start()] + src[semi + 1:]
            continue
        depth, j = 0, brace
        while j < len(src):
            if src[j] == "{":
                depth += 1
            elif src[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        src = src[:m.start()] + src[j + 1:]


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (aliases dropped)."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [tree] if tree else []
    prefix = tree[:i]
    body = tree[i + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if not p:
            continue
        for e in expand_use(p):
            out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


class Crate:
    def __init__(self, root):
        self.src = os.path.join(root, "src")
        self.files = {}  # module path tuple -> file
        for dirpath, _, names in os.walk(self.src):
            rel = os.path.relpath(dirpath, self.src)
            if rel.split(os.sep)[0] in ("bin", "tests"):
                continue
            for name in names:
                if not name.endswith(".rs"):
                    continue
                parts = [] if rel == "." else rel.split(os.sep)
                stem = name[:-3]
                if stem in ("lib", "main") and not parts:
                    mod = ()
                elif stem == "mod":
                    mod = tuple(parts)
                else:
                    mod = tuple(parts + [stem])
                if stem in ("tests", "test") or "tests" in parts:
                    continue
                self.files[mod] = os.path.join(dirpath, name)
        self.code = {}
        self.lines = {}
        self.reexports = {}  # module -> {name: absolute path tuple}
        for mod, path in self.files.items():
            with open(path, encoding="utf-8") as f:
                text = f.read()
            code = strip_cfg_test(strip_comments_and_strings(text))
            # strings and comments kept for counting; braces in them are rare
            # enough in test items that the strip stays line-accurate
            self.lines[mod] = strip_cfg_test(text).count("\n")
            self.code[mod] = code
            rx = {}
            for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
                for p in expand_use(m.group(1)):
                    absolute = self.absolute(mod, p.split("::"))
                    if absolute:
                        rx[absolute[-1]] = absolute
            self.reexports[mod] = rx

    def absolute(self, mod, segs):
        segs = [s for s in segs if s]
        if not segs:
            return None
        if segs[0] == "crate":
            return tuple(segs[1:])
        if segs[0] == "self":
            return mod + tuple(segs[1:])
        if segs[0] == "super":
            base = list(mod)
            while segs and segs[0] == "super":
                if base:
                    base.pop()
                segs = segs[1:]
            return tuple(base) + tuple(segs)
        # uniform paths: a child module of this one
        if mod + (segs[0],) in self.files:
            return mod + tuple(segs)
        return None

    def file_of(self, path, seen=0):
        """The module whose file defines what `path` names."""
        path = tuple(path)
        best = ()
        for k in range(len(path), -1, -1):
            if path[:k] in self.files:
                best = path[:k]
                break
        rest = path[len(best):]
        if rest and seen < 8:
            target = self.reexports.get(best, {}).get(rest[0])
            if target and target[: len(best)] != best + (rest[0],):
                return self.file_of(target + rest[1:], seen + 1)
        return best

    def edges(self):
        out = {m: set() for m in self.files}
        for mod, code in self.code.items():
            paths = []
            for m in re.finditer(r"\buse\s+([^;]+);", code):
                paths += expand_use(m.group(1))
            inline = re.sub(r"\buse\s+[^;]+;", "", code)
            for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::" + IDENT + ")+)", inline):
                paths.append(m.group(1))
            for p in paths:
                a = self.absolute(mod, p.split("::"))
                if a is None:
                    continue
                target = self.file_of(a)
                # A module owns its children (declares, re-exports, calls
                # them): parent -> child is not an edge; child -> parent is.
                if target[: len(mod)] == mod:
                    continue
                if target in self.files:
                    out[mod].add(target)
        return out


def sccs(graph):
    index, low, stack, on, result, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            result.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return result


def name(mod):
    return "::".join(mod) or "(root)"


def rooms(d):
    """Each top-level module and the top-level modules its files use."""
    crate = Crate(d)
    graph = crate.edges()
    uses = {}
    for m, targets in graph.items():
        room = m[0] if m else "(lib)"
        uses.setdefault(room, set())
        for t in targets:
            other = t[0] if t else "(lib)"
            if other != room:
                uses[room].add(other)
    order, seen = [], set()

    def visit(r, path=()):
        if r in seen or r in path:
            return
        for u in sorted(uses.get(r, ())):
            visit(u, path + (r,))
        seen.add(r)
        order.append(r)

    for r in sorted(uses):
        visit(r)
    print(f"{d}:")
    for r in order:
        print(f"  {r}: {', '.join(sorted(uses[r])) or '-'}")


def main(dirs):
    if dirs and dirs[0] == "--rooms":
        for d in dirs[1:]:
            rooms(d)
        return 0
    bad = False
    for d in dirs:
        crate = Crate(d)
        graph = crate.edges()
        long = sorted((n, m) for m, n in crate.lines.items() if n > MAX_LINES)
        for n, m in reversed(long):
            bad = True
            print(f"{d}: {os.path.relpath(crate.files[m], d)} has {n} production lines (> {MAX_LINES})")
        circles = [c for c in sccs(graph) if len(c) > 1]
        if not circles:
            print(f"{d}: no circle ({len(graph)} files)")
            continue
        bad = True
        for c in circles:
            members = set(c)
            print(f"{d}: circle of {len(c)} files: {', '.join(sorted(name(m) for m in c))}")
            for m in sorted(c):
                inner = sorted(name(t) for t in graph[m] if t in members)
                print(f"    {name(m)} -> {', '.join(inner)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
