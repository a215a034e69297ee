# -*- coding: utf-8 -*-
"""Tricky syntax for the extractor: compared with CPython's ast in the tests."""
from __future__ import annotations
import os.path, sys as system
import xml.etree.ElementTree as ET
from . import sibling
from .. import parent_mod as pm
from ..sub import (a,
                   b as bee,   # comment inside
                   )
from .x.y import *
if True: import json; from . import inline_one
a1 = b1 = c1 = 1
(t1, [t2, *t3]), t4 = (1, [2, 3]), 4
*s1, s2 = range(3)
x_obj = type("X", (), {})()
x_obj.attr = 5          # attribute: binds nothing
d = {}; d["k"] = 1      # subscript: binds nothing
ann1: int = 3
ann2: "list[int]"       # no value: binds nothing
aug += 1 if False else 0 if 'aug' in dir() else 0
lam = lambda q=1, *r, **s: q
f1 = f"{a1!r:>{b1}} {{literal}} {'nested'} {d['k']}"
f2 = rf"\{{raw}} {a1}" + Rb'bytes\'' + U"unicode" + F'''triple {a1
} "quoted" ''' + fR"""x{c1:{'>'}{10}}"""
s3 = '''multi
line = 1
def not_a_def(): pass
'''
s4 = "backslash \" quote = 2"
cont = 1 + \
    2
tab_indented = 1
for i_loop, (j_loop, k_loop) in enumerate([(1, 2)]):
	inner_for = 1
else:
    for_else = 1
while False:
    in_while = 1
else:
    while_else = 1
try:
    in_try = 1
except (ValueError, TypeError) as exc_name:
    in_except = 1
else:
    try_else = 1
finally:
    in_finally = 1
try:
    pass
except* OSError as star_exc:
    in_star = 1
with open(__file__) as fh1, open(__file__) as (fh2):
    in_with = 1
with (open(__file__) as fh3,
      open(__file__) as fh4):
    pass
match sys.argv:
    case [_, *rest] if rest:
        in_case = 1
    case {"k": v_pat}:
        in_case2 = 1
    case _: in_case3 = 1
match = 5
case = match
@decorator(arg=1)
@other
class Klass(Base, metaclass=Meta):
    class_attr = 1
    def method(self):
        import inside_method
        local = 1
async def coro():
    from .. import in_coro
    async with ctx() as cw:
        pass
    async for af in gen():
        pass
def func(a: int = 1, *, b: str = "x") -> dict[str, int]: return {}
def __getattr__(name): raise AttributeError(name)
if (walrus := 1):
    in_if_walrus = 1
elif other:
    in_elif = 1
else:
    in_else = 1
global g_unused
del d
print(x_obj, file=system.stderr); semicolon_a = 1; semicolon_b = 2
[listcomp_var for listcomp_var in range(2)]
big = 0x_ff + 1_000.5e-3 + 0o17 + 0b1 + 1j + .5
