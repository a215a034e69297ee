/* builder/: definitions and Dockerfiles. */
#include <stdlib.h>
#include <string.h>

#include "builder/definition/definition.h"
#include "builder/attest/sbom.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

void
definition_parses_sections (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  test_write (dir, "files/a.py", "x = 1\n");
  test_write (dir, "manifest.txt", "# comment\n\na.py   pkg/a.py\n");
  test_write (dir, "image.conf", "[image]\nname = x:1\nfrom = base:1\n\n[copy]\n"
                                 "manifest manifest.txt files /opt/lib\n"
                                 "file files/a.py /etc/a.conf mode=0600\nsymlink /bin/sh busybox\n"
                                 "[new]\n/etc/a.conf\n[env]\nK = v w\n[label]\nl = 1\n");
  struct ib_definition *d = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_definition_load (dir, &d, &err) == 0);
  if (d == NULL)
    return;
  CHECK_STR (t, d->name, "x:1");
  CHECK_STR (t, d->from, "base:1");
  CHECK (t, d->n_items == 3);
  CHECK_STR (t, d->items[0].origin, "manifest.txt:3");
  cleanup_free char *target = ib_copy_item_target (&d->items[0]);
  CHECK_STR (t, target, "/opt/lib/pkg/a.py");
  CHECK (t, d->items[1].mode == 0600);
  CHECK_STR (t, d->items[1].origin, "image.conf:7");
  CHECK (t, d->items[2].type == IB_ENTRY_SYMLINK);
  CHECK (t, d->n_env == 1 && strcmp (d->env[0], "K=v w") == 0);
  CHECK (t, d->n_labels == 1 && strcmp (d->labels[1], "1") == 0);
  CHECK (t, d->n_new == 1);
  ib_definition_free (d);
}

/* Regression: `program` after a gate line in [smoke] freed the recorded gate
 * text without clearing it (a double free at ib_definition_free, exit 134). */
void
definition_smoke_program_after_a_gate_line (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  test_write (dir, "smoke.c", "int main (void) { return 0; }\n");
  test_write (dir, "image.conf", "[image]\nname = x:1\nfrom = base:1\n[smoke]\nkernels /k.fatbin\nnccl /libnccl.so.2\n"
                                 "dcp 2\nprogram smoke.c\n"
                                 "timeout 60\n");
  struct ib_definition *d = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_definition_load (dir, &d, &err) == 0);
  if (err)
    fprintf (stderr, "  got: %s\n", err->msg);
  ib_error_release (&err);
  if (d == NULL)
    return;
  /* The gate text (recorded in the provenance) keeps both gate lines and
   * leaves out the machine-local program path. */
  CHECK_STR (t, d->gate_text, "[smoke]\nkernels /k.fatbin\nnccl /libnccl.so.2\ndcp 2\ntimeout 60\n");
  CHECK (t, d->smoke_program && strstr (d->smoke_program, "smoke.c"));
  CHECK (t, d->smoke_dcp == 2 && d->smoke_timeout == 60);
  ib_definition_free (d);
}

void
definition_syntax_errors_name_the_line (struct test_ctx *t)
{
  const char *cases[][2] = {
    { "[image]\nname = x:1\nfrom = b:1\n[copy]\nfrob a b\n", "image.conf:5" },
    { "[image]\nname = x:1\n", "no from" },
    { "name = x:1\n", "image.conf:1: text before" },
    { "[image]\nname = x:1\nfrom = b:1\n[bogus]\nk = v\n", "unknown section [bogus]" },
    { "[image]\nname = x:1\nfrom = b:1\n[copy]\nmanifest nope.txt files /x\n", "nope.txt" },
  };
  for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++)
    {
      test_write (test_tmpdir (), "image.conf", cases[i][0]);
      struct ib_definition *d = NULL;
      ib_error_t err = NULL;
      CHECK (t, ib_definition_load (test_tmpdir (), &d, &err) < 0);
      CHECK (t, err && err->class == IB_EDEFINITION && strstr (err->msg, cases[i][1]));
      if (err && !strstr (err->msg, cases[i][1]))
        fprintf (stderr, "  got: %s\n", err->msg);
      ib_error_release (&err);
    }
}

void
dockerfile_subset (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  test_write (dir, "a.py", "a\n");
  test_write (dir, "tree/x/y.py", "y\n");
  const char *df = test_write (dir, "Dockerfile", "# syntax is ignored\nARG BASE=base:1\nARG DEST\n"
                                                  "FROM ${BASE} AS final\n# imgbuild:new /opt/a.py\n"
                                                  "COPY --chmod=0755 a.py $DEST/a.py\n"
                                                  "COPY tree/ /srv/\nENV A=1 \\\n    B=\"two words\"\n"
                                                  "ENV LEGACY some value\nLABEL k=v\nCMD [\"/bin/sh\"]\n");
  char *args[] = { "DEST=/opt" };
  struct ib_definition *d = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_definition_from_dockerfile (df, NULL, args, 1, &d, &err) == 0);
  if (d == NULL)
    {
      fprintf (stderr, "  got: %s\n", err ? err->msg : "?");
      ib_error_release (&err);
      return;
    }
  CHECK_STR (t, d->from, "base:1");
  CHECK (t, d->n_items >= 3);
  CHECK_STR (t, d->items[0].raw_target, "/opt/a.py");
  CHECK (t, d->items[0].mode == 0755);
  CHECK (t, d->n_env == 3);
  CHECK_STR (t, d->env[1], "B=two words");
  CHECK_STR (t, d->env[2], "LEGACY=some value");
  CHECK (t, d->n_new == 1 && strcmp (d->new_paths[0], "/opt/a.py") == 0);
  CHECK_STR (t, d->cmd_json, "[\"/bin/sh\"]");
  bool found = false;
  for (size_t i = 0; i < d->n_items; i++)
    found |= strcmp (d->items[i].raw_target, "/srv/x/y.py") == 0;
  CHECK (t, found);
  ib_definition_free (d);
  test_write (dir, "Dockerfile", "FROM a:1\nRUN make\n");
  CHECK (t, ib_definition_from_dockerfile (df, NULL, NULL, 0, &d, &err) < 0 && strstr (err->msg, "Dockerfile:2: RUN"));
  ib_error_release (&err);
}

/* A [smoke] `program` line once freed the recorded gate text, and the next
 * gate line wrote into freed memory (found by tests/fuzz/fuzz_definition). */
void
definition_smoke_program_keeps_gate_text (struct test_ctx *t)
{
  test_write (test_tmpdir (), "image.conf",
              "[image]\nname = x:1\nfrom = b:1\n[symbols]\ncheck-package vllm\n[smoke]\nprogram smoke\n"
              "kernels /k.fatbin\nargs --a 1\n");
  struct ib_definition *d = NULL, *again = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_definition_load (test_tmpdir (), &d, &err) == 0);
  if (d == NULL)
    {
      ib_error_release (&err);
      return;
    }
  CHECK (t, d->gate_text && strstr (d->gate_text, "check-package vllm") && strstr (d->gate_text, "kernels /k.fatbin"));
  CHECK (t, d->gate_text && !strstr (d->gate_text, "program"));
  CHECK (t, ib_definition_from_gate_text (d->gate_text, &again, &err) == 0);
  CHECK (t, again && again->n_check_packages == 1 && again->n_smoke_args == 2);
  ib_definition_free (again);
  ib_definition_free (d);
  ib_error_release (&err);
}

/* `COPY a ""` read the byte before an empty destination (found by
 * tests/fuzz/fuzz_dockerfile); it is a definition error. */
void
dockerfile_refuses_empty_copy_destination (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  test_write (dir, "a.py", "a\n");
  const char *df = test_write (dir, "Dockerfile", "FROM b:1\nCOPY a.py \"\"\n");
  struct ib_definition *d = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_definition_from_dockerfile (df, NULL, NULL, 0, &d, &err) < 0);
  CHECK (t, err && err->class == IB_EDEFINITION && strstr (err->msg, "Dockerfile:2: COPY destination is empty"));
  ib_error_release (&err);
}

/* A gate line ending in "[smoke]" made the next [smoke] line be recorded
 * under the section before it, and the recorded definition did not load
 * again (found by the gate-text property of tests/fuzz/fuzz_definition). */
void
definition_gate_text_sections_survive_brackets (struct test_ctx *t)
{
  test_write (test_tmpdir (), "image.conf",
              "[image]\nname = x:1\nfrom = b:1\n[kernels]\nrequire /a k[smoke]\n[smoke]\nkernels /k\n");
  struct ib_definition *d = NULL, *again = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_definition_load (test_tmpdir (), &d, &err) == 0);
  CHECK (t, d && d->gate_text && strstr (d->gate_text, "k[smoke]\n[smoke]\nkernels /k"));
  CHECK (t, d && ib_definition_from_gate_text (d->gate_text, &again, &err) == 0);
  CHECK (t, again && again->n_kernel_required == 1 && again->smoke_kernels && strcmp (again->smoke_kernels, "/k") == 0);
  if (err)
    fprintf (stderr, "  got: %s\n", err->msg);
  ib_error_release (&err);
  ib_definition_free (again);
  ib_definition_free (d);
}

/* The SBOM's dpkg status reader: paragraphs however they end (no final
 * newline, several blank lines, continuation lines), states that count,
 * fields in any case and order; entries without a name or version left
 * out.  And the Python metadata headers stop at the first blank line. */
void
sbom_reads_dpkg_status_and_metadata (struct test_ctx *t)
{
  const char *status = "Package: a\nStatus: install ok installed\nVersion: 1:2.0-1\nDescription: x\n more\n .\n"
                       "\n\n"
                       "package: b\nstatus: deinstall ok config-files\nversion: 1\n\n"
                       "Version: 3\nStatus: hold ok unpacked\nPackage: c\nArchitecture: arm64\n\n"
                       "Package: nover\nStatus: install ok installed\n\n"
                       "Status: install ok installed\nVersion: 9\n\n"
                       "Package: last\nStatus: install ok half-configured\nVersion: 0.1";
  cJSON *list = cJSON_CreateArray ();
  size_t ids = 0;
  ib_sbom_add_dpkg (list, status, &ids);
  CHECK (t, cJSON_GetArraySize (list) == 3);
  const char *want[][3] = { { "a", "1:2.0-1", "pkg:deb/debian/a@1:2.0-1" },
                            { "c", "3", "pkg:deb/debian/c@3?arch=arm64" },
                            { "last", "0.1", "pkg:deb/debian/last@0.1" } };
  for (int i = 0; i < 3 && i < cJSON_GetArraySize (list); i++)
    {
      const cJSON *p = cJSON_GetArrayItem (list, i);
      CHECK_STR (t, cJSON_GetObjectItem (p, "name")->valuestring, want[i][0]);
      CHECK_STR (t, cJSON_GetObjectItem (p, "versionInfo")->valuestring, want[i][1]);
      const cJSON *ref = cJSON_GetArrayItem (cJSON_GetObjectItem (p, "externalRefs"), 0);
      CHECK_STR (t, cJSON_GetObjectItem (ref, "referenceLocator")->valuestring, want[i][2]);
    }
  cJSON_Delete (list);
  list = cJSON_CreateArray ();
  ib_sbom_add_dpkg (list, "", &ids);
  ib_sbom_add_dpkg (list, "\n\n\n", &ids);
  ib_sbom_add_dpkg (list, "Package:\nVersion:\nStatus:", &ids);
  ib_sbom_add_dpkg (list, "Package: p\nVersion: 1\nStatus: install ok weird-state", &ids);
  CHECK (t, cJSON_GetArraySize (list) == 0);
  cJSON_Delete (list);
  char *name, *version;
  CHECK (t, ib_sbom_python_metadata ("Metadata-Version: 2.1\nName:  torch \r\nVersion: 2.1.0\n\nName: x\n", &name,
                                     &version) == 0);
  CHECK_STR (t, name, "torch");
  CHECK_STR (t, version, "2.1.0");
  free (name);
  free (version);
  CHECK (t, ib_sbom_python_metadata ("Name: a\n\nVersion: 1\n", &name, &version) < 0);
  free (name);
  free (version);
}
