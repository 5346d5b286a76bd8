/*
 * ring_fold.c — a read of the ring up to a stream position, with the frees folded (layout: gpumem_ring.h).
 *
 * A third of a training's records are a free_completed right after its own free_requested: the
 * block had no other stream's use pending, so the allocator finishes the free at once. The
 * monitor's model does the per-record work in JavaScript, where each record costs it tens of
 * nanoseconds; here, the pair becomes one record (GPUMEM_ACTION_FREE) for a few nanoseconds of C,
 * and the model's ingest reads a third fewer records. A pair split by another record (a stream
 * still using the block, a mark in between) or by the end of a batch stays two records.
 *
 * `until` stops the read at that stream position (gpumem_ring_next): a caller that must act
 * between two records (the agent's names, taken at a known position) reads up to it exactly,
 * where a folded batch no longer maps its records one to one onto positions.
 */
#include "ring.h"

int64_t gpumem_ring_read_until(gpumem_reader *r, uint32_t max, uint64_t until, int fold, double *time_us, uint8_t *action,
                               int8_t *device, uint8_t *phase, double *address, double *size, double *stream, double *extra,
                               uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost) {
  const uint64_t next = gpumem_ring_next(r);
  if (until <= next) {
    *lost = 0;
    return 0;
  }
  if (until - next < max) max = (uint32_t)(until - next);
  const int64_t n = gpumem_ring_read(r, max, time_us, action, device, phase, address, size, stream, extra, step, range,
                                     line, lost);
  if (!fold || n < 0) return n;
  int64_t w = 0; /* records kept so far; record i moves down to w */
  for (int64_t i = 0; i < n; i++) {
    if (action[i] == GPUMEM_ACTION_FREE_COMPLETED && w > 0 && action[w - 1] == GPUMEM_ACTION_FREE_REQUESTED &&
        address[w - 1] == address[i] && size[w - 1] == size[i] && device[w - 1] == device[i]) {
      action[w - 1] = GPUMEM_ACTION_FREE;
      extra[w - 1] = time_us[i]; /* when the free completed: nothing of the pair is lost */
      continue;
    }
    if (w != i) {
      time_us[w] = time_us[i];
      action[w] = action[i];
      device[w] = device[i];
      phase[w] = phase[i];
      address[w] = address[i];
      size[w] = size[i];
      stream[w] = stream[i];
      extra[w] = extra[i];
      step[w] = step[i];
      range[w] = range[i];
      line[w] = line[i];
    }
    w++;
  }
  return w;
}
