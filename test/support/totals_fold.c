/*
 * The hook's totals (gpumem_totals_apply, cuda/gpumem_ring.h) outside the hook, for
 * test/profiler/totals-rule.test.ts:
 *   totals_fold rule         what gpumem_totals_apply does to zero totals, per row of GPUMEM_TOTALS_RULE
 *   totals_fold fold RING    every record of a recording through it: the totals at each sync record
 *                            and at the end, one JSON object a line
 */
#include "ring.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_totals(const gpumem_totals *t) {
  printf("{\"requested\":%lld,\"allocated\":%lld,\"active\":%lld,\"reserved\":%lld,\"peak_allocated\":%lld,"
         "\"peak_active\":%lld,\"peak_reserved\":%lld,\"n_alloc\":%lld,\"n_free\":%lld,\"n_segment_alloc\":%lld,"
         "\"n_segment_free\":%lld,\"n_oom\":%lld}",
         (long long)t->requested, (long long)t->allocated, (long long)t->active, (long long)t->reserved,
         (long long)t->peak_allocated, (long long)t->peak_active, (long long)t->peak_reserved, (long long)t->n_alloc,
         (long long)t->n_free, (long long)t->n_segment_alloc, (long long)t->n_segment_free, (long long)t->n_oom);
}

/* Each row's action, through the hook's function, from zero totals with a record of 1000 bytes. */
static int rule(void) {
  const char *sep = "";
  printf("{");
#define ROW(action, requested, allocated, active, reserved, count)                                                     \
  do {                                                                                                                 \
    gpumem_totals t;                                                                                                   \
    memset(&t, 0, sizeof t);                                                                                           \
    gpumem_totals_apply(&t, GPUMEM_ACTION_##action, 1000);                                                             \
    printf("%s\"%s\":", sep, #action);                                                                                 \
    print_totals(&t);                                                                                                  \
    sep = ",";                                                                                                         \
  } while (0);
  GPUMEM_TOTALS_RULE(ROW)
#undef ROW
  printf("}\n");
  return 0;
}

static int fold(const char *path) {
  gpumem_reader *r;
  char err[256];
  if (gpumem_ring_open(path, GPUMEM_RING_COPY, &r, err, sizeof err) != 0) {
    fprintf(stderr, "totals_fold: %s\n", err);
    return 1;
  }
  enum { N = 4096 };
  static double time_us[N], address[N], size[N], stream[N], extra[N];
  static uint8_t action[N], phase[N];
  static int8_t device[N];
  static uint32_t step[N], range[N], line[N];
  static gpumem_totals totals[GPUMEM_MAX_DEVICES];
  static int seen[GPUMEM_MAX_DEVICES];
  for (;;) {
    uint64_t lost;
    int64_t n = gpumem_ring_read(r, N, time_us, action, device, phase, address, size, stream, extra, step, range, line, &lost);
    if (n <= 0) break;
    for (int64_t i = 0; i < n; i++) {
      const int d = device[i];
      if (d < 0 || d >= (int)GPUMEM_MAX_DEVICES) continue;
      if (action[i] == GPUMEM_ACTION_SYNC) {
        /* extra: the hook's count, or GPUMEM_SYNC_UNSURE (-1 here) */
        printf("{\"sync\":%d,\"torch\":[%.0f,%.0f,%.0f,%.0f],\"at\":", d, address[i], size[i], stream[i],
               extra[i] >= 9.2e18 ? -1.0 : extra[i]);
        print_totals(&totals[d]);
        printf("}\n");
      } else if (action[i] < GPUMEM_FIRST_MARK) {
        gpumem_totals_apply(&totals[d], action[i], (int64_t)size[i]);
        seen[d] = 1;
      }
    }
  }
  for (int d = 0; d < (int)GPUMEM_MAX_DEVICES; d++)
    if (seen[d]) {
      printf("{\"end\":%d,\"at\":", d);
      print_totals(&totals[d]);
      printf("}\n");
    }
  gpumem_ring_close(r);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "rule")) return rule();
  if (argc == 3 && !strcmp(argv[1], "fold")) return fold(argv[2]);
  fprintf(stderr, "usage: totals_fold rule | totals_fold fold RING\n");
  return 2;
}
