/*
 * ring_fold.c — a read of the ring up to a stream position, with the frees folded (layout: gpumem_ring.h).
 *
 * A third of a training's records are a free_completed right after its own free_requested: the
 * block had no other stream's use pending, so the allocator finishes the free at once. The
 * monitor's model does the per-record work in JavaScript, where each record costs it tens of
 * nanoseconds; in the read, the pair becomes one record (GPUMEM_ACTION_FREE) for a few nanoseconds of C,
 * and the model's ingest reads a third fewer records. A pair split by another record (a stream
 * still using the block, a mark in between) or by the end of a batch stays two records.
 *
 * `until` stops the read at that stream position (gpumem_ring_next): a caller that must act
 * between two records (the agent's names, taken at a known position) reads up to it exactly,
 * where a folded batch no longer maps its records one to one onto positions.
 */
#define _GNU_SOURCE
#include "ring_reader.h"

int64_t gpumem_ring_read_until(gpumem_reader *r, uint32_t max, uint64_t until, int fold, double *time_us, uint8_t *action,
                               int8_t *device, uint8_t *phase, double *address, double *size, double *stream, double *extra,
                               uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost) {
  const uint64_t next = gpumem_ring_next(r);
  if (until <= next) {
    *lost = 0;
    return 0;
  }
  if (until - next < max) max = (uint32_t)(until - next);
  /* The fold is done as the records are read (ring_read.c): each column is written once. */
  return gpumem_read_columns(r, max, fold, time_us, action, device, phase, address, size, stream, extra, step, range, line,
                             lost);
}
