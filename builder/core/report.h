/* The build report: one row per step and gate, for people on stderr as it
 * happens, and for machines as one JSON document (schema
 * "imgbuild.report/v1", docs/imgbuild-report.schema.json) on stdout with --json. */
#ifndef IB_REPORT_H
#define IB_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "util/fsutil.h" /* ib_now */

enum ib_gate_status
{
  IB_GATE_PASS,
  IB_GATE_FAIL,
  IB_GATE_SKIP,
};

struct ib_report;

/* SCHEMA names the JSON document ("imgbuild.report/v1"). */
struct ib_report *ib_report_new (const char *prog, const char *schema, bool quiet);
void ib_report_free (struct ib_report *r);
/* A line for people ("base dsv41-flash-b12x:local sha256:…"). */
void ib_report_note (struct ib_report *r, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* The definition that the gate rows and problems from now on are about
 * (imgverify checks each recorded definition in turn); NULL for none. */
void ib_report_set_definition (struct ib_report *r, const char *file);
/* A requirement line of the current definition: GATE checks it, ORIGIN
 * ("image.conf:31") is how the gates' messages about it begin, FILE and
 * LINE where it is written ("" when not known: a recorded definition's
 * lines are those of its gate sections), TEXT what it requires.  Kept for
 * the per-line reports (JUnit), not in the JSON document;
 * ib_report_requirements lists them, each {"gate","file","line","origin",
 * "text"[,"definition"]}. */
void ib_report_requirement (struct ib_report *r, const char *gate, const char *file, const char *line,
                            const char *origin, const char *text);
const cJSON *ib_report_requirements (const struct ib_report *r);
/* A problem found by a gate, an error or a warning: one line on stderr as
 * it is found ("PROG: GATE: MSG", "PROG: GATE: warning: MSG"), and an
 * entry of "problems". */
void ib_report_problem (struct ib_report *r, const char *gate, bool is_error, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
/* How many errors GATE has reported so far. */
size_t ib_report_errors (const struct ib_report *r, const char *gate);
/* The problem that stopped the run: the first error of GATE is marked
 * "stopped" and moved to the front of "problems"; when GATE reported none
 * (an I/O error, a step that is not a gate), MSG is added there instead. */
void ib_report_stopped (struct ib_report *r, const char *gate, const char *msg);
/* A gate's row.  DETAIL says what it checked or why it failed; a skipped
 * gate's DETAIL is the reason it checked nothing (never NULL then). */
void ib_report_gate (struct ib_report *r, const char *gate, enum ib_gate_status status, double seconds,
                     const char *detail);
/* Whether GATE has a row that ran (pass or fail), for any definition. */
bool ib_report_gate_ran (const struct ib_report *r, const char *gate);
/* The machine-readable document; "image" etc. are set by the pipeline. */
cJSON *ib_report_json (struct ib_report *r);
/* Set the document's "resources": what this process took of the machine
 * until now (its own peak RSS and CPU time) and, apart, what the programs
 * it ran and waited for took (nvcc, the image's CPython in a chroot, the
 * container runtime): the memory bound of the benchmarks is on the first.
 * Called just before the document is printed or written; again replaces. */
void ib_report_resources (struct ib_report *r);

/* A progress bar for long hashing or transfers: bytes, rate, time left, on
 * stderr, only when stderr is a terminal (and the report is not quiet).
 * ib_progress_add may be called from several threads. */
struct ib_progress;
struct ib_progress *ib_progress_start (struct ib_report *r, const char *what, unsigned long long total);
void ib_progress_add (struct ib_progress *p, unsigned long long n);
void ib_progress_end (struct ib_progress *p);

/* Whether progress may be drawn: stderr is a terminal, the report is not
 * quiet. */
bool ib_report_interactive (const struct ib_report *r);
/* "12.3 MB" */
void ib_human_bytes (double b, char *buf, size_t n);

/* The same bars for registry transfers (layers/ calls them). */
struct ib_transfer_report;
void ib_report_transfers (struct ib_report *r, struct ib_transfer_report *out);

#endif
