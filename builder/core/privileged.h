/* The privileged entries of an image's layers (layers/tar/tarcheck.h:
 * setuid/setgid files, devices, FIFOs, sockets): what every distribution
 * base holds (`su`, `passwd`, `mount` are setuid; debootstrap makes
 * `/dev/null`), so imgbuild and imgverify count and report them rather
 * than refuse them; --strict-base refuses them.  One summary, the same in
 * both programs: a note for people, every entry in the JSON. */
#ifndef IB_PRIVILEGED_H
#define IB_PRIVILEGED_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "builder/core/report.h"

/* Of the findings TEXTS (N of them), those of a privileged kind: a note on
 * R for WHOSE ("base", "image") with their counts and the first few
 * names, and INTO.privileged_entries = {"setuid_files", "device_nodes",
 * "fifos", "sockets", "entries": [every finding's text]}; nothing when
 * there is none.  Returns how many there were. */
size_t ib_report_privileged (struct ib_report *r, cJSON *into, const char *whose, const char *const *texts, size_t n);

#endif
