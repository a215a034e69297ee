"""Run by the symbols tests: every binding here executes, so the module's
namespace after running it (runpy) is CPython's own answer to what the
module defines, compared with imgverify --python-symbols.  Assignment
expressions in every place they bind at module level, and in the places
where they do not (function, class and lambda bodies)."""
import os.path

if (w_if := len("ab")):
    in_if = w_if
while (w_while := 0):
    pass
[w_comp := i * 2 for i in range(3)]
{k: (w_dict := v) for k, v in {"a": 1}.items()}
list((w_gen := j) for j in range(2))
[[w_nested := a for a in range(2)] for b in range(2)]
lam = lambda q=(w_default := 1): (w_lambda_body := q)
lam()


def fn(a=(w_def_default := 2)):
    w_in_function = 3
    return (w_in_function_expr := a + w_in_function)


fn()


class K((w_base := object)):
    (w_in_class := 4)


print(w_printed := 5, file=open(os.devnull, "w"))
x_tuple = (w_in_tuple := 6), 7
match [1, 2]:
    case [first, *others] if (w_guard := others):
        pass


def deco(f):
    return f


@(w_deco := deco)
def decorated():
    pass


for idx in [(w_for_iter := 9)]:
    pass
with open(os.devnull) as (w_with_target):
    (w_in_with := 10)
