#!/usr/bin/env python3
"""The module graph of every crate in the workspace, and its cycles.

A node is a source file (a module); A -> B when A names an item of B: a `use` or an inline path
through `crate::`, `super::`, `self::` or a child module A declares. A path is resolved to the
deepest module file it passes through, so `crate::plan::scope::of_record` is an edge to
`plan/scope.rs` and `crate::plan::ServiceKey` one to `plan/mod.rs`. A module and its own
`#[cfg(test)]` test module are one node (a test module exists to reach into its parent).

  hack/module_graph.py            print every cycle (strongly connected set of files); exit 1
                                  if there is one
  hack/module_graph.py --edges    also print every edge, one per line

Comments and string literals are stripped before paths are read, so a path in a doc comment
is no edge.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def strip(text):
    """Source without comments and string literals (a rough lexer: good enough for paths)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            i += len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path tuple -> file
        self.test_of = {}  # file of a test module -> its parent's file
        root = "lib.rs" if os.path.exists(os.path.join(src, "lib.rs")) else "main.rs"
        self.walk((), os.path.join(src, root))

    def walk(self, path, file):
        self.files[path] = file
        text = strip(open(file, encoding="utf-8").read())
        base = os.path.dirname(file)
        own = os.path.splitext(os.path.basename(file))[0]
        sub_dir = base if own in ("lib", "main", "mod") else os.path.join(base, own)
        for m in re.finditer(r'(#\[cfg\(test\)\]\s*)?(#\[path\s*=\s*""\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text):
            name = m.group(3)
            child = None
            if m.group(2):
                raw = open(file, encoding="utf-8").read()
                pm = re.search(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+' + name + r'\s*;', raw)
                child = os.path.join(base, pm.group(1)) if pm else None
            for cand in (os.path.join(sub_dir, name + ".rs"), os.path.join(sub_dir, name, "mod.rs")):
                if child is None and os.path.exists(cand):
                    child = cand
            if child and os.path.exists(child):
                if m.group(1) and name == "tests":
                    self.test_of[child] = file
                self.walk(path + (name,), child)

    def node(self, file):
        while file in self.test_of:
            file = self.test_of[file]
        return file

    def resolve(self, segments, depth=0):
        """The deepest module file a path (from the crate root) passes through; an item the
        module only re-exports (`pub use child::Item`) resolves to where it is defined."""
        best, k = (), 0
        for k in range(1, len(segments) + 1):
            if tuple(segments[:k]) in self.files:
                best = tuple(segments[:k])
            else:
                break
        rest = segments[len(best):]
        if rest and depth < 8:
            target = self.reexports(best).get(rest[0])
            if target is not None:
                return self.resolve(list(target) + rest[1:], depth + 1)
        return self.files[best]

    def reexports(self, module):
        """`pub use` items of a module: name -> the path it stands for (from the crate root)."""
        cache = self.__dict__.setdefault("_reexports", {})
        if module not in cache:
            cache[module] = {}
            text = strip(open(self.files[module], encoding="utf-8").read())
            children = {p[-1] for p in self.files if len(p) == len(module) + 1 and p[:-1] == module}
            for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
                for p in expand(m.group(1)):
                    if len(p) < 2:
                        continue
                    if p[0] == "crate":
                        full = p[1:]
                    elif p[0] in ("self", "super"):
                        cur = list(module)
                        while p and p[0] in ("self", "super"):
                            if p[0] == "super":
                                cur = cur[:-1]
                            p = p[1:]
                        full = cur + p
                    elif p[0] in children:
                        full = list(module) + p
                    else:
                        continue
                    cache[module][full[-1]] = tuple(full[:-1]) + (full[-1],)
        return cache[module]

    def edges(self):
        by_file = {f: p for p, f in self.files.items()}
        for path, file in self.files.items():
            text = strip(open(file, encoding="utf-8").read())
            children = {p[-1] for p in self.files if len(p) == len(path) + 1 and p[:-1] == path}
            targets = set()
            # `use` trees: expand `a::{b, c::d}` into paths.
            inline = inline_depths(text)
            for m in re.finditer(r"\buse\s+([^;]+);", text):
                for p in expand(m.group(1)):
                    targets.add(self.absolute(path, skip_inline(p, inline(m.start())), children))
            for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", text):
                p = skip_inline(m.group(1).split("::"), inline(m.start()))
                targets.add(self.absolute(path, p, children))
            for child in children:
                if re.search(r"(?<![:\w])" + child + r"::\w", text):
                    targets.add(self.resolve(list(path) + [child]))
            for t in targets:
                if t and self.node(t) != self.node(file):
                    yield self.node(file), self.node(t)
        del by_file

    def absolute(self, here, segments, children):
        segs = list(segments)
        if not segs:
            return None
        if segs[0] == "crate":
            return self.resolve(segs[1:])
        if segs[0] in ("self", "super"):
            cur = list(here)
            while segs and segs[0] in ("self", "super"):
                if segs[0] == "super":
                    # The test module's `super` is its parent's parent only if it is not inline.
                    cur = cur[:-1]
                segs = segs[1:]
            return self.resolve(cur + segs)
        if segs[0] in children:
            return self.resolve(list(here) + segs)
        return None


def inline_depths(text):
    """A function: position -> how many inline `mod x { ... }` blocks enclose it."""
    spans = []
    for m in re.finditer(r"\bmod\s+\w+\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        spans.append((m.end(), i))
    return lambda pos: sum(1 for a, b in spans if a <= pos < b)


def skip_inline(segments, depth):
    """A path written inside `depth` inline modules, as seen from the file's module: its first
    `depth` `super`s only climb out of the inline modules."""
    segs = list(segments)
    while depth and segs and segs[0] == "super":
        segs, depth = segs[1:], depth - 1
    return segs if segs else ["self"]


def expand(tree):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]]."""
    tree = re.sub(r"\s+", "", tree)
    tree = re.sub(r"\bas\w+", "", tree)

    def parse(s):
        out = []
        depth, start = 0, 0
        parts = []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for part in parts:
            if not part:
                continue
            if "{" in part:
                prefix, rest = part.split("{", 1)
                rest = rest[: rest.rfind("}")]
                prefix = [x for x in prefix.split("::") if x]
                for sub in parse(rest):
                    out.append(prefix + sub)
            else:
                out.append([x for x in part.split("::") if x and x != "*"])
        return out

    return parse(tree)


def sccs(nodes, graph):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    show_edges = "--edges" in sys.argv
    crates_dir = os.path.join(ROOT, "crates")
    cycles = 0
    total_nodes = total_edges = 0
    for name in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, name, "src")
        if not os.path.isdir(src):
            continue
        crate = Crate(src)
        graph = {}
        for a, b in crate.edges():
            graph.setdefault(a, set()).add(b)
        nodes = sorted({crate.node(f) for f in crate.files.values()})
        total_nodes += len(nodes)
        total_edges += sum(len(v) for v in graph.values())
        rel = lambda f: os.path.relpath(f, ROOT)
        if show_edges:
            for a in sorted(graph):
                for b in sorted(graph[a]):
                    print(f"{rel(a)} -> {rel(b)}")
        for comp in sccs(nodes, graph):
            if len(comp) > 1:
                cycles += 1
                print(f"cycle in {name} ({len(comp)} files): " + ", ".join(sorted(rel(f) for f in comp)))
    print(f"module graph: {total_nodes} modules, {total_edges} edges, {cycles} cycles")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
