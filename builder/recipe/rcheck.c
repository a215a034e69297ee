/* The recipe checks that need only the recipe and the image's inventory:
 * flags, environment variable names, the shape; the report. */
#include "builder/recipe/rcheck.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/recipe/rcheck_private.h"

void
ib_rcheck_add (struct ib_rcheck *c, int line, enum ib_rstatus st, const char *check, const char *subject,
               const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *msg = NULL;
  if (vasprintf (&msg, fmt, ap) < 0)
    abort ();
  va_end (ap);
  c->l = ib_xrealloc (c->l, (c->n + 1) * sizeof (*c->l));
  c->l[c->n++] = (struct ib_rline){ line, st, ib_xstrdup (check), ib_xstrdup (subject), msg };
  c->counts[st]++;
}

void
ib_rcheck_append (struct ib_rcheck *c, size_t i, const char *text)
{
  char *m = ib_xasprintf ("%s%s", c->l[i].message, text);
  free (c->l[i].message);
  c->l[i].message = m;
}

const char *
ib_rstatus_name (enum ib_rstatus s)
{
  static const char *const names[] = { "pass", "fail", "unchecked", "warning" };
  return names[s];
}

static char *
join_choices (const struct ib_cli_flag *f)
{
  size_t len = 1;
  for (size_t i = 0; i < f->n_choices; i++)
    len += strlen (f->choice[i]) + 2;
  char *s = ib_xcalloc (len, 1);
  for (size_t i = 0; i < f->n_choices; i++)
    {
      if (i)
        strcat (s, ", ");
      strcat (s, f->choice[i]);
    }
  return s;
}

static void
check_flag (struct ib_rcheck *c, const struct ib_recipe_flag *rf, const struct ib_py_inventory *inv)
{
  const struct ib_cli_flag *f = ib_py_inventory_flag (inv, rf->name);
  if (f == NULL)
    {
      size_t n_dyn;
      const struct ib_env_read *dyn = ib_py_inventory_dynamic (inv, &n_dyn);
      if (dyn)
        ib_rcheck_add (c, rf->line, IB_R_UNCHECKED, "flag", rf->name,
                       "not declared by a literal name; the image also adds flags by computed names (%s:%d, %zu such "
                       "calls)",
                       dyn->file, dyn->line, n_dyn);
      else
        ib_rcheck_add (c, rf->line, IB_R_FAIL, "flag", rf->name,
                       "`vllm serve` of the image does not accept it (no add_argument or argument dataclass field "
                       "declares it in the %zu Python files of its vllm package)",
                       ib_py_inventory_files (inv));
      return;
    }
  if (rf->value == NULL || f->choices == IB_CHOICES_ANY || f->negated)
    {
      ib_rcheck_add (c, rf->line, IB_R_PASS, "flag", rf->name, "declared at %s:%d%s", f->file, f->line,
                     rf->value && f->choices == IB_CHOICES_ANY ? " (no choices: any value)" : "");
      return;
    }
  if (f->choices == IB_CHOICES_UNSETTLED)
    {
      ib_rcheck_add (c, rf->value_line, IB_R_UNCHECKED, "flag", rf->name,
                     "declared at %s:%d; its value `%s` is unchecked: the choices come from %s", f->file, f->line,
                     rf->value, f->unsettled ? f->unsettled : "code this reading does not evaluate");
      return;
    }
  cleanup_free char *all = join_choices (f);
  for (size_t i = 0; i < f->n_choices; i++)
    if (strcmp (f->choice[i], rf->value) == 0)
      {
        ib_rcheck_add (c, rf->value_line, IB_R_PASS, "flag", rf->name, "`%s` is one of its choices (%s; %s:%d)",
                       rf->value, all, f->file, f->line);
        return;
      }
  ib_rcheck_add (c, rf->value_line, IB_R_FAIL, "flag", rf->name, "`%s` is not one of its choices: %s (%s:%d)",
                 rf->value, all, f->file, f->line);
}

void
ib_rcheck_flags (struct ib_rcheck *c, const struct ib_recipe *r, const struct ib_py_inventory *inv)
{
  for (size_t i = 0; i < r->n_flags; i++)
    check_flag (c, &r->flags[i], inv);
}

/* Prefixes and names of variables read outside the image's own code: the
 * runtime, the CUDA driver, libraries the launcher and the model hub use.
 * Documented in docs/imgverify.md ("Recipes"). */
static const struct
{
  const char *pattern; /* a trailing '*' is a prefix */
  const char *reader;
} outside[] = {
  { "HF_*", "huggingface_hub" },
  { "HUGGINGFACE_*", "huggingface_hub" },
  { "TRANSFORMERS_*", "transformers" },
  { "TOKENIZERS_PARALLELISM", "tokenizers" },
  { "NCCL_*", "NCCL" },
  { "CUDA_*", "the CUDA runtime and driver" },
  { "NVIDIA_*", "the NVIDIA container runtime" },
  { "NVSHMEM_*", "NVSHMEM" },
  { "UCX_*", "UCX" },
  { "GLOO_*", "Gloo" },
  { "OMP_NUM_THREADS", "OpenMP" },
  { "MKL_NUM_THREADS", "MKL" },
  { "OPENBLAS_NUM_THREADS", "OpenBLAS" },
  { "PYTORCH_CUDA_ALLOC_CONF", "PyTorch's CUDA allocator" },
  { "PYTORCH_ALLOC_CONF", "PyTorch's allocator" },
  { "TORCH_NCCL_*", "PyTorch's NCCL process group" },
  { "TORCHINDUCTOR_*", "TorchInductor" },
  { "TRITON_*", "Triton" },
  { "MAX_JOBS", "torch.utils.cpp_extension and ninja (JIT builds)" },
  { "PYTHON*", "CPython" },
  { "PATH", "the shell" },
  { "LD_LIBRARY_PATH", "the dynamic loader" },
  { "LD_PRELOAD", "the dynamic loader" },
  { "HOME", "everything" },
  { "TMPDIR", "everything" },
  { "TZ", "libc" },
  { "LANG", "libc" },
  { "LC_*", "libc" },
};

const char *
ib_recipe_outside_variable (const char *name)
{
  for (size_t i = 0; i < sizeof (outside) / sizeof (outside[0]); i++)
    {
      const char *p = outside[i].pattern;
      size_t n = strlen (p);
      if (p[n - 1] == '*' ? strncmp (name, p, n - 1) == 0 : strcmp (name, p) == 0)
        return outside[i].reader;
    }
  return NULL;
}

void
ib_rcheck_shape (struct ib_rcheck *c, const struct ib_recipe *r)
{
  long tp = r->tensor_parallel_size ? r->tensor_parallel_size : 1;
  long pp = r->pipeline_parallel_size ? r->pipeline_parallel_size : 1;
  long nodes = r->required_nodes ? r->required_nodes : 1;
  int line = r->tensor_parallel_size_line ? r->tensor_parallel_size_line : r->required_nodes_line;
  if ((tp * pp) % nodes != 0)
    ib_rcheck_add (c, line, IB_R_FAIL, "shape", "ranks",
                   "TP %ld x PP %ld = %ld ranks do not spread evenly over %ld nodes", tp, pp, tp * pp, nodes);
  else
    ib_rcheck_add (c, line, IB_R_PASS, "shape", "ranks", "TP %ld x PP %ld = %ld ranks, %ld per node over %ld nodes",
                   tp, pp, tp * pp, tp * pp / nodes, nodes);
  if (r->dcp > 1 && tp % r->dcp != 0)
    ib_rcheck_add (c, r->dcp_line, IB_R_FAIL, "shape", "dcp",
                   "decode context parallel size %ld does not divide tensor parallel size %ld", r->dcp, tp);
  else if (r->dcp > 1)
    ib_rcheck_add (c, r->dcp_line, IB_R_PASS, "shape", "dcp", "DCP %ld: %ld groups of %ld ranks within TP %ld", r->dcp,
                   tp / r->dcp, r->dcp, tp);
  if (r->shm_size)
    ib_rcheck_add (c, r->shm_size_line, IB_R_PASS, "shape", "shm_size", "%s = %llu bytes of /dev/shm", r->shm_size,
                   r->shm_bytes);
}

void
ib_rcheck_free (struct ib_rcheck *c)
{
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->n; i++)
    free (c->l[i].check), free (c->l[i].subject), free (c->l[i].message);
  free (c->l);
  free (c->recipe);
  free (c);
}

void
ib_rcheck_print (FILE *out, const struct ib_rcheck *c, bool failures_only)
{
  for (size_t i = 0; i < c->n; i++)
    {
      const struct ib_rline *l = &c->l[i];
      if (failures_only && l->status == IB_R_PASS)
        continue;
      fprintf (out, "%s:%d: %s %s: %s: %s\n", c->recipe, l->line, l->check, l->subject, ib_rstatus_name (l->status),
               l->message);
    }
}

cJSON *
ib_rcheck_json (const struct ib_rcheck *c)
{
  cJSON *doc = cJSON_CreateObject ();
  cJSON_AddStringToObject (doc, "recipe", c->recipe);
  cJSON *list = cJSON_AddArrayToObject (doc, "checks");
  for (size_t i = 0; i < c->n; i++)
    {
      cJSON *j = cJSON_CreateObject ();
      cJSON_AddStringToObject (j, "file", c->recipe);
      cJSON_AddNumberToObject (j, "line", c->l[i].line);
      cJSON_AddStringToObject (j, "check", c->l[i].check);
      cJSON_AddStringToObject (j, "subject", c->l[i].subject);
      cJSON_AddStringToObject (j, "status", ib_rstatus_name (c->l[i].status));
      cJSON_AddStringToObject (j, "message", c->l[i].message);
      cJSON_AddItemToArray (list, j);
    }
  cJSON *sum = cJSON_AddObjectToObject (doc, "summary");
  for (int s = 0; s < 4; s++)
    cJSON_AddNumberToObject (sum, ib_rstatus_name ((enum ib_rstatus) s), (double) c->counts[s]);
  cJSON_AddNumberToObject (sum, "python_files", (double) c->py_files);
  cJSON_AddNumberToObject (sum, "flags_declared", (double) c->flags_declared);
  cJSON_AddNumberToObject (sum, "env_reads", (double) c->env_reads);
  cJSON_AddNumberToObject (sum, "shared_objects_scanned", (double) c->so_scanned);
  return doc;
}
