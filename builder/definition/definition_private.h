/* What the two definition readers share (definition.c reads image.conf,
 * dockerfile.c reads Dockerfiles): making a definition and adding its
 * entries.  Not part of the module's contract (definition.h). */
#ifndef IB_DEFINITION_PRIVATE_H
#define IB_DEFINITION_PRIVATE_H

#include "builder/definition/definition.h"

/* The most a definition file may weigh. */
#define MAX_DEFINITION_SIZE (4u << 20)

struct ib_definition *ib_def_new (const char *dir, const char *file);
struct ib_copy_item *ib_def_add_item (struct ib_definition *d, enum ib_entry_type type, const char *origin);
void ib_def_add_string (char ***list, size_t *n, const char *s);
void ib_def_add_label (struct ib_definition *d, const char *k, const char *v);
void ib_def_add_env (struct ib_definition *d, const char *k, const char *v);
/* SRC relative to the definition's folder (absolute as given). */
char *ib_def_source_path (const struct ib_definition *d, const char *src);
/* An octal mode ("0644") into *MODE. */
int ib_def_parse_mode (const char *s, int *mode, const char *origin, ib_error_t *err);
/* S without its leading and trailing blanks (in place). */
char *ib_def_trim (char *s);
/* Split on blanks into at most MAX words; returns the count. */
int ib_def_split_words (char *s, char **w, int max);
/* A folder SRC copied to TARGET, recursively, symlinks kept. */
int ib_def_add_tree (struct ib_definition *d, const char *src, const char *target, const char *origin,
                     ib_error_t *err);

#endif
