#!/usr/bin/env python3
"""The man pages (docs/man/*.md) against what they describe, so that the two
cannot drift apart (tests/integration/docs.sh).

  tests/docs_options.py options PROGRAM PAGE.md
      the options of `PROGRAM --help` == those of PAGE.md's OPTIONS
  tests/docs_options.py environment PROGRAM PAGE.md [ROOT]
      every IMGBUILD_* variable that `PROGRAM --help` names is in PAGE.md's
      ENVIRONMENT; with ROOT, every IMGBUILD_* there is one that ROOT's C
      reads (or sets)
  tests/docs_options.py exit-codes PROGRAM PAGE.md
      the codes of --help's "Exit codes:" == those of PAGE.md's EXIT STATUS
  tests/docs_options.py conf-keys ROOT PAGE.md
      the sections of image.conf and the keys of each that the definition
      parser (ROOT/builder/definition/...) accepts == those of PAGE.md
  tests/docs_options.py list help|man|conf FILE   one side, one a line:
      `help` the options of a --help text (FILE, or - for stdin), `man` the
      options of a page's OPTIONS, `conf` the keys of image.conf(5) or, for
      a folder, of the parser under it ("SECTION KEY", or "SECTION")

What counts as an option (a token `--name` or `-x`):
  --help: the first column of its option table, i.e. a line indented by 1 to
      8 blanks that starts with `-`, up to the first run of two blanks
      (descriptions are indented further, and their `-verify`, `--flag` are
      not options); `--foo=false` is `--foo`.
  the page: the terms of the definition lists under `# OPTIONS` (a line
      followed by a line starting with `: `), Markdown emphasis removed;
      subsections (`## ...`) are part of it.
A key of image.conf(5) is the first word of a term under a `## [SECTION]`
heading of `# SECTIONS`; a term whose first word is a placeholder in
capitals (KEY = VALUE, /PATH) is no key.  The parser's keys are the strings
that its section handlers compare with a line's first word (w[0], k, key,
word), followed into the functions they call.

Exit 0 when the two sides agree, 1 with one line per difference (naming
the side that has it), 2 on bad usage or when a side comes out empty: the
rule above no longer fits the text, and this script needs a look.
"""
import os
import re
import subprocess
import sys

TOKEN = re.compile(r"(?<![\w-])(--[A-Za-z0-9][\w-]*|-[A-Za-z0-9](?![\w-]))")
HELP_TERM = re.compile(r"^ {1,8}(-\S.*)$")


def die(msg):
    print(f"docs_options: {msg}", file=sys.stderr)
    sys.exit(2)


def help_text(program):
    r = subprocess.run([program, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0 or not r.stdout:
        die(f"`{program} --help` exited with {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def help_options(text):
    opts = set()
    for line in text.splitlines():
        m = HELP_TERM.match(line)
        if m:
            term = re.split(r"\s{2,}", m.group(1), maxsplit=1)[0]
            opts.update(TOKEN.findall(term))
    return opts


def unmark(s):
    """Markdown emphasis, code spans and backslash escapes removed."""
    s = re.sub(r"\\(.)", r"\1", s)
    return s.replace("**", "").replace("*", "").replace("`", "")


def section(md, title):
    """The lines of the level-1 section TITLE (up to the next `# `), its
    fenced code blocks left out: an example's `# comment` is no heading."""
    lines, inside, found, fence = [], False, False, False
    for line in md.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        if line.startswith("# "):
            inside = line[2:].strip().upper() == title
            found |= inside
            continue
        if inside:
            lines.append(line)
    return lines if found else None


def terms(lines):
    """The terms of the definition lists in LINES, with their subsection."""
    out, sub = [], ""
    for i, line in enumerate(lines):
        if line.startswith("#"):
            sub = line.lstrip("#").strip()
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not line.startswith(":") and re.match(r":[ \t]", nxt):
            out.append((sub, unmark(line.strip())))
    return out


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        die(f"{path}: {e.strerror}")


def man_section_terms(page, title):
    lines = section(read(page), title)
    if lines is None:
        die(f"{page} has no `# {title}` section")
    return terms(lines)


def man_options(page):
    opts = set()
    for _, t in man_section_terms(page, "OPTIONS"):
        opts.update(TOKEN.findall(t))
    return opts


def compare(a, a_name, b, b_name, what):
    if not a:
        die(f"no {what} found in {a_name}")
    if not b:
        die(f"no {what} found in {b_name}")
    diff = [f"{x}: in {a_name}, not in {b_name}" for x in sorted(a - b)]
    diff += [f"{x}: in {b_name}, not in {a_name}" for x in sorted(b - a)]
    print("\n".join(diff) if diff else f"{len(a)} {what}: the same in {a_name} and {b_name}")
    return 1 if diff else 0


def cmd_options(program, page):
    name = os.path.basename(program)
    return compare(help_options(help_text(program)), f"{name} --help", man_options(page),
                   f"{page}'s OPTIONS", "options")


# ---- environment -----------------------------------------------------------

VAR = re.compile(r"\bIMGBUILD_[A-Z0-9_]*[A-Z0-9]\b")


def c_sources(root):
    for top in ("util", "layers", "symbol-check", "kernels", "builder", "cli"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".cc", ".h")):
                    yield os.path.join(d, f)


def cmd_environment(program, page, root=None):
    name = os.path.basename(program)
    want = set(VAR.findall(help_text(program)))
    have = set()
    for _, t in man_section_terms(page, "ENVIRONMENT"):
        have.update(re.findall(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b", t))
    if not want:
        die(f"{name} --help names no IMGBUILD_ variable")
    bad = [f"{v}: in {name} --help, not in {page}'s ENVIRONMENT" for v in sorted(want - have)]
    if root:
        code = "".join(read(p) for p in c_sources(root))
        bad += [f"{v}: in {page}'s ENVIRONMENT, but no C file under {root} names it"
                for v in sorted(v for v in have if v.startswith("IMGBUILD_") and v not in code)]
    print("\n".join(bad) if bad else f"{len(want)} IMGBUILD_ variables of {name} --help: all in {page}'s ENVIRONMENT")
    return 1 if bad else 0


# ---- exit codes -------------------------------------------------------------

def help_exit_codes(text):
    codes, inside = set(), False
    for line in text.splitlines():
        if line.startswith("Exit codes:"):
            inside = True
            continue
        if inside and not line.startswith(" "):
            break
        if inside:
            # "  5  symbol or native link gate    6  kernel gate ..." holds three.
            codes.update(int(c) for c in re.findall(r"(?:^ {2}| {3,})(\d{1,3}) {2}(?=\S)", line))
    return codes


def cmd_exit_codes(program, page):
    name = os.path.basename(program)
    have = set()
    for _, t in man_section_terms(page, "EXIT STATUS"):
        have.update(int(c) for c in re.findall(r"^\d{1,3}\b", t))
    return compare(help_exit_codes(help_text(program)), f"{name} --help's Exit codes", have,
                   f"{page}'s EXIT STATUS", "exit codes")


# ---- image.conf -------------------------------------------------------------

# Where the section handlers may live, and the names a handler gives the
# line's first word (a `KEY VALUE` line's w[0], a `KEY = VALUE` line's k).
PARSER_FILES = ("builder/definition/definition.c", "builder/definition/native_conf.c",
                "builder/definition/dockerfile.c", "kernels/target.c", "layers/runner/contract.c",
                "builder/diff/triage.c")
KEY_CMP = re.compile(r'\bstrn?(?:case)?cmp \((?:w\[0\]|k|key|word), "([^"]+)"')
SECTION_CMP = re.compile(r'\bstrn?cmp \(section, "([^"]+)"(?:, \d+)?\) == 0\)')
# [triage] is read by imgverify --triage, not by the build's parser.
ELSEWHERE = {"triage": "check_requires"}


def functions(root):
    """name -> body of every function of PARSER_FILES (GNU style: the name
    at the start of a line, the body up to the next `}` there)."""
    out = {}
    for rel in PARSER_FILES:
        text = read(os.path.join(root, rel))
        for m in re.finditer(r"^(\w+) \([^;{]*?\)\s*\n\{\n(.*?)^\}", text, re.M | re.S):
            out[m.group(1)] = (rel, m.group(2))
    return out


def keys_of(fns, name, seen):
    if name in seen or name not in fns:
        return set()
    seen.add(name)
    body = fns[name][1]
    keys = set(KEY_CMP.findall(body))
    for callee in set(re.findall(r"\b(\w+) \(", body)):
        keys |= keys_of(fns, callee, seen)
    return keys


def parser_keys(root):
    fns = functions(root)
    if "parse_conf_line" not in fns:
        die(f"no parse_conf_line in {root}/builder/definition/definition.c")
    body = fns["parse_conf_line"][1]
    found = list(SECTION_CMP.finditer(body))
    conf = {}
    for i, m in enumerate(found):
        sec = m.group(1)
        if sec.endswith(" "):
            continue  # "copy OS/ARCH": the lines of [copy], for one platform
        chunk = body[m.end():found[i + 1].start() if i + 1 < len(found) else len(body)]
        call = re.match(r"\s*return (\w+) \(", chunk)
        if sec in ELSEWHERE:
            keys = keys_of(fns, ELSEWHERE[sec], set())
        elif call:
            keys = keys_of(fns, call.group(1), set())
        else:
            keys = set(KEY_CMP.findall(chunk))  # keys written in place ([recipe]), or none ([new], [env])
        conf[sec] = keys
    if not conf or "image" not in conf or not conf["image"]:
        die("the parser's sections were not found (parse_conf_line has another shape now)")
    return conf


def page_keys(page):
    lines = section(read(page), "SECTIONS")
    if lines is None:
        die(f"{page} has no `# SECTIONS` section")
    conf, current = {}, None
    for i, line in enumerate(lines):
        m = re.match(r"## .*?\[([a-z]+)\]", line)
        if m:
            current = m.group(1)
            conf.setdefault(current, set())
            continue
        if current is None or line.startswith("#"):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not line.startswith(":") and re.match(r":[ \t]", nxt):
            word = unmark(line.strip()).split()[0]
            if re.fullmatch(r"[a-z][a-z0-9-]*", word):
                conf[current].add(word)
    return conf


def flat(conf):
    return {f"[{s}]" for s in conf} | {f"[{s}] {k}" for s, ks in conf.items() for k in ks}


def cmd_conf_keys(root, page):
    return compare(flat(parser_keys(root)), f"the parser under {root}", flat(page_keys(page)), page,
                   "sections and keys")


def cmd_list(kind, path):
    if kind == "help":
        got = help_options(sys.stdin.read() if path == "-" else read(path))
    elif kind == "man":
        got = man_options(path)
    elif kind == "conf":
        conf = parser_keys(path) if os.path.isdir(path) else page_keys(path)
        got = {f"{s} {k}" for s, ks in conf.items() for k in ks} | {s for s, ks in conf.items() if not ks}
    else:
        die(f"list help|man|conf, not `{kind}`")
    print("\n".join(sorted(got)))
    return 0


def main(argv):
    cmds = {"options": (cmd_options, 2), "environment": (cmd_environment, 2, 3),
            "exit-codes": (cmd_exit_codes, 2), "conf-keys": (cmd_conf_keys, 2), "list": (cmd_list, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 not in cmds[argv[1]][1:]:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
