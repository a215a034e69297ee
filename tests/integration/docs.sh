# docs: the man pages, imgbuild(1), imgverify(1) and image.conf(5), written
# in go-md2man's Markdown (docs/man/*.md; `make install` renders them).
# Each renders, and man reads it without a warning; each says what its
# program does: the options of its OPTIONS are those of --help, its
# ENVIRONMENT names every IMGBUILD_ variable that --help names, its EXIT
# STATUS has --help's codes; image.conf(5) has the sections and keys that
# the definition parser accepts.  tests/docs_options.py reads both sides;
# the tests show it naming what a page lacks.

DOCS=$ROOT/tests/docs_options.py
PAGES=$ROOT/docs/man

need_go_md2man() {
  command -v go-md2man >/dev/null || skip_test "no go-md2man (make deps installs it)"
}

# Rendered by go-md2man, then read by man-db's man (groff -w mac) and by
# groff with every warning on: not one warning.  The page is the section it
# says it is (its first line, "IMGBUILD(1)"), and at MANWIDTH=80 no line is
# wider (an example line that cannot wrap).
t_docs_man_pages_render() {
  need_go_md2man
  command -v man >/dev/null || skip_test "no man (make test-deps installs man-db)"
  local md page title n=0
  for md in "$PAGES"/*.md; do
    page=$(basename "$md" .md)
    go-md2man -in "$md" -out "$page"
    MANWIDTH=80 man -l --warnings "$page" >"$page.txt" 2>"$page.warn"
    groff -ww -man -Tutf8 -z "$page" 2>>"$page.warn"
    if [ -s "$page.warn" ]; then
      log "$page: warnings"
      cat "$page.warn" >&2
      return 1
    fi
    title=$(echo "${page%.*}" | tr a-z A-Z)"(${page##*.})"
    head -1 "$page.txt" | grep -qF "$title"
    grep -q '^NAME$' "$page.txt"
    grep -q '^SEE ALSO$' "$page.txt"
    if [ "$(LC_ALL=C.UTF-8 wc -L <"$page.txt")" -gt 80 ]; then
      log "$page: lines wider than 80 columns:"
      LC_ALL=C.UTF-8 awk 'length($0) > 80' "$page.txt" >&2
      return 1
    fi
    log "$page: $(wc -l <"$page.txt") lines"
    n=$((n + 1))
  done
  [ "$n" = 3 ]
}

t_docs_man_options_equal_help() {
  python3 "$DOCS" options "$IB" "$PAGES/imgbuild.1.md"
  python3 "$DOCS" options "$IV" "$PAGES/imgverify.1.md"
}

t_docs_man_environment_and_exit_status_follow_help() {
  local p
  for p in "$IB" "$IV"; do
    python3 "$DOCS" environment "$p" "$PAGES/$(basename "$p").1.md" "$ROOT"
    python3 "$DOCS" exit-codes "$p" "$PAGES/$(basename "$p").1.md"
  done
}

# The same check on copies of imgbuild(1): one without the entry of
# --sign-with (its term and its paragraph), one whose -q, --quiet lost its
# -q and whose --gc is misspelt.  Each difference is one line, naming the
# option and the side that has it.
t_docs_man_checker_sees_a_missing_option() {
  local rc=0
  [ "$(grep -c '^\*\*--sign-with\*\*' "$PAGES/imgbuild.1.md")" = 1 ]
  sed '/^\*\*--sign-with\*\*/,/^$/d' "$PAGES/imgbuild.1.md" >imgbuild.1.md
  [ "$(grep -c '^\*\*--sign-with\*\*' imgbuild.1.md)" = 0 ]
  python3 "$DOCS" options "$IB" imgbuild.1.md >out.txt || rc=$?
  cat out.txt
  [ "$rc" = 1 ]
  [ "$(wc -l <out.txt)" = 1 ]
  grep -qxF -- "--sign-with: in imgbuild --help, not in imgbuild.1.md's OPTIONS" out.txt

  sed -e 's/^\*\*-q\*\*, \*\*--quiet\*\*$/**--quiet**/' -e 's/^\*\*--gc\*\*$/**--gcc**/' \
    "$PAGES/imgbuild.1.md" >imgbuild.1.md
  rc=0
  python3 "$DOCS" options "$IB" imgbuild.1.md >out.txt || rc=$?
  cat out.txt
  [ "$rc" = 1 ]
  [ "$(wc -l <out.txt)" = 3 ]
  grep -qxF -- "--gc: in imgbuild --help, not in imgbuild.1.md's OPTIONS" out.txt
  grep -qxF -- "-q: in imgbuild --help, not in imgbuild.1.md's OPTIONS" out.txt
  grep -qxF -- "--gcc: in imgbuild.1.md's OPTIONS, not in imgbuild --help" out.txt
}

# The parser has no table of its keys: the checker follows the section
# handlers of parse_conf_line (builder/definition/definition.c) into the
# functions they call, and takes the strings each compares a line's first
# word with.  On a copy of the parser's C with a key and a section planted,
# and on a page that lost [smoke]'s `program`, it names each of them.
t_docs_image_conf_keys_equal_parser() {
  python3 "$DOCS" conf-keys "$ROOT" "$PAGES/image.conf.5.md"
  (cd "$ROOT" && find builder kernels layers -name '*.c' | tar -cf - -T -) | tar -xf -
  sed -i 's/strcmp (w\[0\], "ranks") == 0 ?/strcmp (w[0], "world") == 0 || strcmp (w[0], "ranks") == 0 ?/' \
    builder/definition/definition.c
  sed -i 's/^  if (strcmp (section, "run") == 0)$/  if (strcmp (section, "health") == 0)\n    return 0;\n&/' \
    builder/definition/definition.c
  sed '/^\*\*program\*\* /,/^$/d' "$PAGES/image.conf.5.md" >image.conf.5.md
  local rc=0
  python3 "$DOCS" conf-keys . image.conf.5.md >out.txt || rc=$?
  cat out.txt
  [ "$rc" = 1 ]
  [ "$(wc -l <out.txt)" = 3 ]
  grep -qxF "[health]: in the parser under ., not in image.conf.5.md" out.txt
  grep -qxF "[smoke] program: in the parser under ., not in image.conf.5.md" out.txt
  grep -qxF "[smoke] world: in the parser under ., not in image.conf.5.md" out.txt
}
