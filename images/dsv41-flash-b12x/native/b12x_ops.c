/* The stand-in base's native extension: the custom ops that the b12x MoE
 * backend calls through torch.ops._b12x_C.  Only its exported, versioned
 * dynamic symbols matter to imgbuild's native symbol gate. */
#include <stddef.h>
#include <stdint.h>

int
b12x_fused_moe (void *out, const void *x, const void *w13, const void *w2, const float *topk_weights,
                const int32_t *topk_ids, size_t tokens, size_t top_k)
{
  (void) out, (void) x, (void) w13, (void) w2, (void) topk_weights, (void) topk_ids;
  return tokens && top_k ? 0 : -1;
}

const char *
b12x_version (void)
{
  return "b12x 0.4.1";
}

void *
PyInit__b12x_C (void)
{
  return NULL;
}
