/* The build report: one row per step and gate, for people on stderr as it
 * happens, and for machines as one JSON document (schema
 * "imgbuild.report/v1", documented in README.md) on stdout with --json. */
#ifndef IB_REPORT_H
#define IB_REPORT_H

#include <stdbool.h>

#include <cjson/cJSON.h>

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
/* A problem found by a gate; each is one line, reported as it is found. */
void ib_report_problem (struct ib_report *r, const char *gate, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
void ib_report_gate (struct ib_report *r, const char *gate, enum ib_gate_status status, double seconds,
                     const char *detail);
/* The machine-readable document; "image" etc. are set by the pipeline. */
cJSON *ib_report_json (struct ib_report *r);
double ib_now (void);

/* A progress bar for long hashing or transfers: bytes, rate, time left, on
 * stderr, only when stderr is a terminal (and the report is not quiet).
 * ib_progress_add may be called from several threads. */
struct ib_progress;
struct ib_progress *ib_progress_start (struct ib_report *r, const char *what, unsigned long long total);
void ib_progress_add (struct ib_progress *p, unsigned long long n);
void ib_progress_end (struct ib_progress *p);

/* The same bars for registry transfers (layers/ calls them). */
struct ib_transfer_report;
void ib_report_transfers (struct ib_report *r, struct ib_transfer_report *out);

#endif
