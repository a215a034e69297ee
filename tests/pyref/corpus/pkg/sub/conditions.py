# Imports under conditions (symbol-check/pysyms.h, ib_py_import.cond):
# what the extractor records must be what the ast reference derives.
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import a_typing_only
else:
    import a_at_run_time

if sys.version_info >= (3, 11):
    import tomllib
elif sys.version_info >= (3, 8):  # a comment after the header
    import a_38
elif (os.environ.get("X")
      and sys.platform == 'linux'):
    import a_env
else:
    import a_old
    if os.name == "nt": import a_nt; import a_nt2
    else: import a_posix


def lazy():
    try:
        import a_try
    except ImportError:
        pass
    else:
        import a_try_else
    while os.environ.get("MORE"):
        import a_loop
        break
    else:
        import a_loop_else
    for _ in ():
        import a_for
    with open(os.devnull) as f:
        if f:
            import a_with


match sys.platform:
    case "linux" | "linux2":
        import a_linux
    case str(name) if name.startswith("win"):
        import a_win
    case _:
        import a_other

if not sys.version_info < (3, 0): import a_py3
elif True:

    # a blank line and a comment before the body
    import a_never
if sys.version_info[:2] == (3, 11) or sys.platform in ("win32", "cygwin"):
    if os.environ.get("Y"):
        pass
    else:
        from os import path as a_nested
