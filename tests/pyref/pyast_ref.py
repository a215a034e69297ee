#!/usr/bin/env python3
"""The reference for imgverify --python-symbols, computed with CPython's own
ast module: the same JSON for the same files.  Files that ast cannot parse
are listed under "unparsable" (they have no reference).

The binding rules are those of symbol-check/pysyms.h, written here the
plain way, over the tree CPython builds."""
import ast
import importlib.util
import json
import os
import sys


def module_and_package(path):
    real = os.path.realpath(path)
    d, f = os.path.split(real)
    name = f[:-3] if f.endswith(".py") else f
    is_init = name == "__init__"
    dotted = "" if is_init else name
    while d and os.path.exists(os.path.join(d, "__init__.py")):
        d, part = os.path.split(d)
        dotted = f"{part}.{dotted}" if dotted else part
    if is_init:
        return dotted, dotted
    return dotted, dotted.rpartition(".")[0]


def resolve(module, level, package):
    if level == 0:
        return module
    try:
        return importlib.util.resolve_name("." * level + (module or ""), package or None)
    except (ImportError, ValueError):
        return "." * level + (module or "")


def add_target(t, out):
    if isinstance(t, ast.Name):
        out.add(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            add_target(e, out)
    elif isinstance(t, ast.Starred):
        add_target(t.value, out)


def definitions(body, out):
    for n in body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                add_target(t, out)
        elif isinstance(n, ast.AugAssign):
            add_target(n.target, out)
        elif isinstance(n, ast.AnnAssign):
            if n.value is not None:
                add_target(n.target, out)
        elif isinstance(n, ast.Import):
            for a in n.names:
                out.add(a.asname or a.name.split(".")[0])
        elif isinstance(n, ast.ImportFrom):
            for a in n.names:
                if a.name != "*":
                    out.add(a.asname or a.name)
        elif isinstance(n, (ast.For, ast.AsyncFor)):
            add_target(n.target, out)
            definitions(n.body, out)
            definitions(n.orelse, out)
        elif isinstance(n, (ast.While, ast.If)):
            definitions(n.body, out)
            definitions(n.orelse, out)
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            for item in n.items:
                if item.optional_vars is not None:
                    add_target(item.optional_vars, out)
            definitions(n.body, out)
        elif isinstance(n, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            definitions(n.body, out)
            for h in n.handlers:
                if h.name:
                    out.add(h.name)
                definitions(h.body, out)
            definitions(n.orelse, out)
            definitions(n.finalbody, out)
        elif isinstance(n, ast.Match):
            for c in n.cases:
                definitions(c.body, out)


def imports(tree, package):
    found = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    out = []
    for n in found:
        if isinstance(n, ast.Import):
            for a in n.names:
                out.append({"line": n.lineno, "module": a.name, "level": 0, "names": [],
                            "asname": a.asname})
        else:
            out.append({"line": n.lineno, "module": resolve(n.module, n.level, package),
                        "level": n.level,
                        "names": [{"name": a.name, "asname": a.asname} for a in n.names]})
    return out


def main(paths):
    files, unparsable = [], []
    for p in paths:
        try:
            with open(p, "rb") as f:
                tree = ast.parse(f.read(), p)
        except (SyntaxError, ValueError, UnicodeDecodeError):
            unparsable.append(p)
            continue
        _, package = module_and_package(p)
        defs = set()
        definitions(tree.body, defs)
        files.append({"path": p, "definitions": sorted(defs), "imports": imports(tree, package)})
    json.dump({"files": files, "unparsable": unparsable}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
