/* What linkgate.c (the check) gives native_memo.c (the verdict kept per
 * base, and ib_native_check, which runs the check or says a kept verdict
 * again).  Not part of the module's contract (linkgate.h). */
#ifndef IB_LINKGATE_PRIVATE_H
#define IB_LINKGATE_PRIVATE_H

#include "symbol-check/link-check/linkgate.h"

/* The check in full over VIEW, with no memo: ib_native_check's contract
 * otherwise (problems to FN, the per-object detail to JSON). */
int ib_native_run (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                   const struct ib_native_rules *rules, ib_problem_fn fn, void *data, struct ib_native_stats *st,
                   cJSON *json, ib_error_t *err);
/* Whether the check, walking a view with rules DATA, picks entry E. */
bool ib_native_selects (void *data, const struct ib_fs_entry *e);
/* KEY's value in IMG's config Env, NULL when unset. */
const char *ib_link_config_env (const struct ib_image *img, const char *key);
/* IMG's ELF machine, from its config's architecture (amd64 when none). */
unsigned ib_link_image_machine (const struct ib_image *img);

#endif
