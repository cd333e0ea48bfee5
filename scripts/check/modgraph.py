#!/usr/bin/env python3
"""Module graph of a Rust crate read from its source files.

An edge A -> B when code in file A names an item of module B: `use` lines (crate::, super::,
self::, or a child module's name) and full paths in code (crate::b::x, super::x, child::x).
Comments are skipped; `mod tests { .. }` blocks are counted apart (--tests adds them).
`mod x;` declarations are ownership, not edges; a `tests.rs` file is its parent's tests. Prints the strongly connected components
with more than one module (the cycles).
Usage: modgraph.py SRC_DIR [--edges] [--tests]
Exits 1 when there is a cycle (crates/toolbrake/tests/architecture.rs runs it on the crates
ARCHITECTURE.md says have none).
"""
import os, re, sys
root = sys.argv[1]
with_tests = '--tests' in sys.argv
mods = {}
test_files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f)
            parts = os.path.relpath(p, root)[:-3].split(os.sep)
            if parts[-1] in ('lib', 'mod', 'main'):
                parts = parts[:-1]
            if parts and parts[-1] == 'tests':
                # A `tests.rs` file is its parent's `mod tests`: test code of the parent.
                test_files[tuple(parts[:-1])] = p
                continue
            mods[tuple(parts)] = p

def resolve(path):
    path = tuple(path)
    while path and path not in mods:
        path = path[:-1]
    return path

def expand(prefix, body):
    out, depth, cur, items = [], 0, '', []
    for ch in body:
        depth += (ch == '{') - (ch == '}')
        if ch == ',' and depth == 0:
            items.append(cur); cur = ''
        else:
            cur += ch
    items.append(cur)
    for it in (i.strip() for i in items):
        if not it:
            continue
        m = re.match(r'^([\w:]*?)(?:::)?\{(.*)\}$', it, re.S)
        if m:
            out += expand(prefix + [x for x in m.group(1).split('::') if x], m.group(2))
        else:
            out.append(prefix + [x for x in it.split(' as ')[0].strip().split('::') if x])
    return out

def split_tests(src):
    m = re.search(r'#\[cfg\(test\)\]\s*mod tests\s*\{', src)
    return (src, '') if not m else (src[:m.start()], src[m.start():])

def refs(m, src, depth_extra):
    """Paths named in src, written inside module m (+ depth_extra inline levels)."""
    children = set(re.findall(r'^\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;', src, re.M))
    here = list(m) + ['_inline'] * depth_extra
    paths = []
    for u in re.finditer(r'\buse\s+([^;]+);', src, re.S):
        paths += expand([], u.group(1))
    paths += [p.split('::') for p in re.findall(r'(?<![\w:])((?:crate|super|self)(?:::\w+)+)', src)]
    if children:
        paths += [p.split('::') for p in re.findall(r'(?<![\w:])((?:%s)(?:::\w+)+)' % '|'.join(children), src)]
    out = set()
    for p in paths:
        if p[0] == 'crate':
            full = p[1:]
        elif p[0] == 'super':
            base = list(here)
            while p and p[0] == 'super':
                base = base[:-1]; p = p[1:]
            full = base + p
        elif p[0] == 'self':
            full = here + p[1:]
        elif p[0] in children:
            full = list(m) + p
        else:
            continue
        full = [x for x in full if x != '_inline']
        r = resolve(full)
        if r != tuple(m):
            out.add(r)
    return out

edges = {}
for m, p in mods.items():
    src = re.sub(r'//[^\n]*', '', open(p).read())
    body, tests = split_tests(src)
    e = refs(m, body, 0)
    if with_tests and tests:
        e |= refs(m, tests, 1)
    if with_tests and m in test_files:
        e |= refs(m, re.sub(r'//[^\n]*', '', open(test_files[m]).read()), 1)
    edges[m] = e

name = lambda m: '/'.join(m) or '(crate root)'
idx, low, st, on, sccs, c = {}, {}, [], set(), [], [0]
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges.get(v, ()):
        if w not in idx:
            sc(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        sccs.append(comp)
for v in sorted(edges):
    if v not in idx:
        sc(v)
if '--edges' in sys.argv:
    for m in sorted(edges):
        print(f"{name(m):26} -> {', '.join(sorted(name(x) for x in edges[m]))}")
cyc = [s for s in sccs if len(s) > 1]
print(f"{len(mods)} modules, {sum(len(e) for e in edges.values())} edges, {len(cyc)} cycle(s)"
      + (" (tests included)" if with_tests else " (tests apart)"))
for s in cyc:
    print(f"  cycle of {len(s)}:", ' <-> '.join(sorted(name(x) for x in s)))
sys.exit(1 if cyc else 0)
