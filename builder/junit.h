/* Reports written to files for CI systems: `--report junit:FILE` (JUnit
 * XML, as GitLab, Jenkins and GitHub's test reporters display it) and
 * `--report json:FILE` (the --json document), on imgbuild and imgverify.
 *
 * The JUnit report has one test suite, PROG NAME, and in it one test case
 * per gate row (classname PROG.gates; a failure lists every error the gate
 * reported, a skip its reason) and one per requirement line of the
 * definitions checked (classname PROG.requirements.GATE, name "image.conf:31:
 * python vllm/x.py f", attributes file and line): a failure when any gate
 * reported an error about that line (the gates' messages begin with the
 * line's origin), skipped when its gate did not run, else a pass.  A failure
 * outside the gates is one more test case with an <error>. */
#ifndef IB_JUNIT_H
#define IB_JUNIT_H

#include "util/error.h"
#include "builder/definition/definition.h"
#include "builder/core/report.h"

/* SPEC is junit:FILE or json:FILE: 0, else an IB_EUSAGE error. */
int ib_report_spec_check (const char *spec, ib_error_t *err);
/* Record DEF's requirement lines ([symbols] python and native lines,
 * [kernels] require lines) in R, about R's current definition.  RECORDED,
 * when DEF was parsed from a provenance record's gate sections, names the
 * definition file it came from (their line numbers are not that file's). */
void ib_report_add_requirements (struct ib_report *r, const struct ib_definition *def, const char *recorded);
/* The JUnit XML of R; PROG names the program ("imgbuild"). */
char *ib_junit_render (struct ib_report *r, const char *prog);
/* Write each of SPECS. */
int ib_report_write_files (struct ib_report *r, const char *prog, char *const *specs, size_t n, ib_error_t *err);

#endif
