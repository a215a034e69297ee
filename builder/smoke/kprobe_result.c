#include "builder/smoke/kprobe_result.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

#define FIELDS 12

/* The tab-separated fields of LINE (modified in place); their count. */
static int
fields (char *line, char **f, int max)
{
  int n = 0;
  for (char *p = line; n < max;)
    {
      f[n++] = p;
      char *t = strchr (p, '\t');
      if (t == NULL)
        break;
      *t = '\0';
      p = t + 1;
    }
  return n;
}

struct gpu_line
{
  int index;
  char name[96], cc[16];
};

static const struct gpu_line *
gpu_of (const struct gpu_line *g, size_t n, int index)
{
  for (size_t i = 0; i < n; i++)
    if (g[i].index == index)
      return &g[i];
  return NULL;
}

static void
add_int (cJSON *o, const char *key, const char *v)
{
  int x = atoi (v);
  if (x >= 0)
    cJSON_AddNumberToObject (o, key, x);
}

/* The summary's message once every result is read: a cubin that does not
 * load fails every kernel in it, and CUDA does not say which one is broken,
 * so the message names the cubin and all its kernels, never one of them as
 * the culprit; several kernels failing each for itself are all named. */
static void
name_the_failed (struct ib_kprobe_summary *sum, bool first_load, bool one_module, const char *names)
{
  char *msg = NULL;
  if (first_load)
    msg = ib_xasprintf ("%s; %s: %s", sum->first_failure, one_module ? "its kernels" : "the kernels that failed",
                        names);
  else if (sum->failed > 1)
    msg = ib_xasprintf ("%s; %zu kernels failed in all: %s", sum->first_failure, sum->failed, names);
  if (msg)
    {
      free (sum->first_failure);
      sum->first_failure = msg;
    }
}

cJSON *
ib_kprobe_results (const struct ib_kplan *plan, const char *output, struct ib_kprobe_summary *sum)
{
  memset (sum, 0, sizeof (*sum));
  cJSON *arr = cJSON_CreateArray ();
  struct gpu_line gpus[16];
  size_t n_gpus = 0;
  /* The probe lines, kept in order. */
  char **lines = NULL;
  size_t n_lines = 0;
  for (const char *l = output; l && *l;)
    {
      const char *e = strchr (l, '\n');
      char *line = strndup (l, e ? (size_t) (e - l) : strlen (l));
      l = e ? e + 1 : NULL;
      char *f[FIELDS];
      if (strncmp (line, "kprobe-gpu\t", 11) == 0 && n_gpus < 16)
        {
          cleanup_free char *copy = ib_xstrdup (line);
          /* Printed again after a failure resets the GPU: once each. */
          if (fields (copy, f, FIELDS) >= 4 && gpu_of (gpus, n_gpus, atoi (f[1])) == NULL)
            {
              gpus[n_gpus].index = atoi (f[1]);
              snprintf (gpus[n_gpus].name, sizeof (gpus[0].name), "%s", f[2]);
              snprintf (gpus[n_gpus].cc, sizeof (gpus[0].cc), "%s", f[3]);
              n_gpus++;
            }
        }
      if (strncmp (line, "kprobe\t", 7) == 0)
        {
          lines = ib_xrealloc (lines, (n_lines + 1) * sizeof (*lines));
          lines[n_lines++] = line;
        }
      else
        free (line);
    }
  /* The failed kernels' names, and whether they all failed as one cubin
   * that did not load (then no kernel of it is more to blame than another). */
  cleanup_free char *names = NULL;
  size_t names_len = 0;
  FILE *nm = open_memstream (&names, &names_len);
  const struct ib_kplan_item *first = NULL;
  bool first_load = false, one_module = false;
  for (size_t i = 0; i < plan->n; i++)
    {
      const struct ib_kplan_item *it = &plan->items[i];
      cJSON *o = cJSON_CreateObject ();
      cJSON_AddStringToObject (o, "kernel", it->kernel);
      cJSON_AddStringToObject (o, "file", it->file);
      cJSON_AddNumberToObject (o, "gpu", it->gpu);
      char cc[16];
      snprintf (cc, sizeof (cc), "%u.%u", it->cc.major, it->cc.minor);
      cJSON_AddStringToObject (o, "compute_capability", cc);
      if (*it->gpu_name)
        cJSON_AddStringToObject (o, "gpu_name", it->gpu_name);
      cJSON_AddItemToArray (arr, o);
      if (it->cubin == NULL)
        {
          cJSON_AddStringToObject (o, "status", "not on this machine");
          sum->absent++;
          continue;
        }
      cJSON_AddStringToObject (o, "symbol", it->symbol);
      cJSON_AddStringToObject (o, "arch", it->arch);
      char *f[FIELDS];
      int nf = 0;
      cleanup_free char *copy = NULL;
      for (size_t k = 0; k < n_lines && nf == 0; k++)
        {
          free (copy);
          copy = ib_xstrdup (lines[k]);
          nf = fields (copy, f, FIELDS);
          /* kprobe GPU STATUS FILE SYMBOL ARCH REGS SHARED MAXDYN THREADS LAUNCH ERROR */
          if (nf < FIELDS - 1 || atoi (f[1]) != it->gpu || strcmp (f[3], it->file) || strcmp (f[4], it->symbol)
              || strcmp (f[5], it->arch))
            nf = 0;
          else
            {
              free (lines[k]); /* each line answers one item */
              lines[k] = ib_xstrdup ("");
            }
        }
      const struct gpu_line *g = gpu_of (gpus, n_gpus, it->gpu);
      if (nf == 0)
        {
          cJSON_AddStringToObject (o, "status", "not run");
          sum->not_run++;
          continue;
        }
      bool pass = strcmp (f[2], "pass") == 0;
      cJSON_AddStringToObject (o, "status", pass ? "pass" : "fail");
      add_int (o, "registers", f[6]);
      add_int (o, "shared_static", f[7]);
      add_int (o, "max_dynamic_shared", f[8]);
      add_int (o, "max_threads", f[9]);
      cJSON_AddStringToObject (o, "launch", f[10]);
      const char *error = nf > 11 ? f[11] : "";
      if (*error)
        cJSON_AddStringToObject (o, "error", error);
      if (pass)
        {
          sum->passed++;
          sum->launched += strncmp (f[10], "launched", 8) == 0;
        }
      else
        {
          bool load = strncmp (error, "cuLibraryLoadData", 17) == 0;
          fprintf (nm, "%s%s", sum->failed ? ", " : "", it->kernel);
          if (sum->failed++ == 0)
            {
              first = it;
              first_load = one_module = load;
              sum->first_failure = load ? ib_xasprintf ("the %s cubin of %s does not load on GPU %d (%s, %s): %s",
                                                        it->arch, it->file, it->gpu, g ? g->name : "?", cc, error)
                                        : ib_xasprintf ("kernel %s (%s, %s) on GPU %d (%s, %s): %s", it->kernel,
                                                        it->file, it->arch, it->gpu, g ? g->name : "?", cc,
                                                        *error ? error : "failed");
            }
          else if (!load || strcmp (it->file, first->file) || strcmp (it->arch, first->arch) || it->gpu != first->gpu)
            one_module = false;
        }
    }
  fclose (nm);
  for (size_t i = 0; i < n_lines; i++)
    free (lines[i]);
  free (lines);
  name_the_failed (sum, first_load, one_module, names);
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream (&text, &len);
  for (size_t i = 0; i < n_gpus; i++)
    fprintf (m, "%sGPU %d %s (%s)", i ? ", " : "", gpus[i].index, gpus[i].name, gpus[i].cc);
  fclose (m);
  sum->gpus = text;
  return arr;
}

void
ib_kprobe_summary_clear (struct ib_kprobe_summary *s)
{
  free (s->first_failure);
  free (s->gpus);
  memset (s, 0, sizeof (*s));
}
