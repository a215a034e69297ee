#!/usr/bin/env python3
"""The reference for imgverify --python-symbols, computed by CPython itself:
the same JSON for the same files.  Files that CPython cannot compile are
listed under "unparsable" (they have no reference).

Definitions are not our rules restated: they are what CPython's compiler
says a module binds.
  - symtable: the module scope's symbols that are assigned or imported (every
    branch, dead code included: the static view the gate needs);
  - the bytecode CPython generates: the names the module's code and its
    comprehensions store (STORE_NAME, STORE_GLOBAL), which adds what symtable
    leaves to the comprehension (`[y := f(i) for i in r]` binds y in the
    module, PEP 572) and tells a bare annotation (`x: int`, which symtable
    counts as assigned but never binds x) from a binding;
  - the docstring's __doc__ is left out: the import system gives every
    module a __doc__, so it is never a definition of the module's own.
Imports come from CPython's ast (every import statement, at any depth)."""
import ast
import dis
import importlib.util
import json
import os
import symtable
import sys
import types


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


COMPREHENSIONS = {"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"}


def stored_names(code):
    """Names the module's code and its comprehensions store."""
    out = [i.argval for i in dis.get_instructions(code) if i.opname in ("STORE_NAME", "STORE_GLOBAL")]
    for c in code.co_consts:
        if isinstance(c, types.CodeType) and c.co_name in COMPREHENSIONS:
            out += stored_names(c)
    return out


def definitions(src, path, tree):
    table = symtable.symtable(src, path, "exec")
    code = compile(tree, path, "exec", dont_inherit=True)
    stored = stored_names(code)
    if ast.get_docstring(tree, clean=False) is not None and stored and stored[0] == "__doc__":
        stored = stored[1:]
    bound = set(stored)
    for sym in table.get_symbols():
        if not (sym.is_assigned() or sym.is_imported()):
            continue
        if sym.is_annotated() and sym.get_name() not in bound and not sym.is_imported():
            continue  # `x: int` alone: annotated, never stored
        bound.add(sym.get_name())
    return bound


CATCHING = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def catches_import_error(handler):
    """Bare, or a name (or attribute) among CATCHING anywhere in the type."""
    if handler.type is None:
        return True
    return any((isinstance(x, ast.Name) and x.id in CATCHING)
               or (isinstance(x, ast.Attribute) and x.attr in CATCHING)
               for x in ast.walk(handler.type))


def is_type_checking(test):
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
                and isinstance(test.value, ast.Name)))


def guarded_nodes(tree):
    """The import nodes that are written to survive their own failure: in
    the body of a try with an except catching ImportError or wider, or in
    the body of `if TYPE_CHECKING:`."""
    out = set()
    for n in ast.walk(tree):
        bodies = []
        if isinstance(n, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            if any(catches_import_error(h) for h in n.handlers):
                bodies = n.body
        elif isinstance(n, ast.If) and is_type_checking(n.test):
            bodies = n.body
        for b in bodies:
            out.update(id(x) for x in ast.walk(b) if isinstance(x, (ast.Import, ast.ImportFrom)))
    return out


def else_line(lines, n):
    """The line of the `else` of if N (the AST keeps none)."""
    for ln in range(n.orelse[0].lineno, n.lineno, -1):
        text = lines[ln - 1]
        if text[n.col_offset:].startswith("else") and text[n.col_offset + 4:].lstrip().startswith(":"):
            return ln
    return 0


def conditions(tree, lines):
    """id(import node) -> (condition, line): the tests of the if, elif,
    else, while and case blocks around it, joined by `and` (an else's and
    an elif's chain as the earlier tests negated; `if TYPE_CHECKING:` is a
    guard, not a condition), as symbol-check/pysyms.h records them."""
    out = {}

    def stmts(body, parts):
        for n in body:
            stmt(n, parts)

    def stmt(n, parts):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            if parts:
                out[id(n)] = (" and ".join(p for p, _ in parts), parts[-1][1])
        elif isinstance(n, ast.If):
            if_chain(n, parts, [])
        elif isinstance(n, ast.While):
            stmts(n.body, parts + [("(%s)" % ast.unparse(n.test), n.lineno)])
            stmts(n.orelse, parts)
        elif isinstance(n, ast.Match):
            for c in n.cases:
                text = "case " + ast.unparse(c.pattern) + (" if " + ast.unparse(c.guard) if c.guard else "")
                stmts(c.body, parts + [("(%s)" % text, c.pattern.lineno)])
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(n, field, None)
                if isinstance(sub, list):
                    for x in sub:
                        if isinstance(x, ast.ExceptHandler):
                            stmts(x.body, parts)
                        elif isinstance(x, ast.stmt):
                            stmt(x, parts)

    def if_chain(n, parts, chain):
        test = ast.unparse(n.test)
        guard = not chain and is_type_checking(n.test)
        stmts(n.body, parts + ([] if guard and not chain else [(" and ".join(chain + ["(%s)" % test]), n.lineno)]))
        chain = chain + ["not (%s)" % test]
        if len(n.orelse) == 1 and isinstance(n.orelse[0], ast.If) and n.orelse[0].col_offset == n.col_offset:
            if_chain(n.orelse[0], parts, chain)  # an elif
        elif n.orelse:
            stmts(n.orelse, parts + [(" and ".join(chain), else_line(lines, n))])

    stmts(tree.body, [])
    return out


def imports(tree, package, lines):
    found = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    guarded = guarded_nodes(tree)
    conds = conditions(tree, lines)
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
        for entry in out[-len(n.names) if isinstance(n, ast.Import) else -1:]:
            if id(n) in guarded:
                entry["guarded"] = True
            if id(n) in conds:
                entry["condition"], entry["condition_line"] = conds[id(n)]
    return out


def main(paths):
    files, unparsable = [], []
    for p in paths:
        try:
            with open(p, "rb") as f:
                raw = f.read()
            tree = ast.parse(raw, p)
            defs = definitions(importlib.util.decode_source(raw), p, tree)
        except (SyntaxError, ValueError, UnicodeDecodeError):
            unparsable.append(p)
            continue
        _, package = module_and_package(p)
        lines = importlib.util.decode_source(raw).splitlines()
        files.append({"path": p, "definitions": sorted(defs), "imports": imports(tree, package, lines)})
    json.dump({"files": files, "unparsable": unparsable}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
