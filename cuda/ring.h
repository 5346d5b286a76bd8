/* ring.h — libgpumem's ring reader (the writer is the hook; both follow gpumem_ring.h). */
#ifndef GPUMEM_RING_READER_H
#define GPUMEM_RING_READER_H

#include "gpumem_ring.h"

typedef struct gpumem_reader gpumem_reader;

enum {
  GPUMEM_RING_E_OPEN = -1,      /* cannot open, stat or map the file (errno's words in err) */
  GPUMEM_RING_E_TRUNCATED = -2, /* shorter than its header or than the header's capacity */
  GPUMEM_RING_E_FORMAT = -3,    /* not a ring: bad magic or impossible geometry */
  GPUMEM_RING_E_VERSION = -4    /* a ring of another ABI version */
};

/* Map `path` read-only and validate it. 0 and *out set, or a GPUMEM_RING_E_* code and err set. */
int gpumem_ring_open(const char *path, gpumem_reader **out, char *err, int errlen);
void gpumem_ring_close(gpumem_reader *r);
/* The mapped header (read-only; fields change while the writer runs). */
const void *gpumem_ring_header(const gpumem_reader *r);
/* Records this reader has consumed (read or counted lost), summed over the lanes. */
uint64_t gpumem_ring_next(const gpumem_reader *r);
/* The ring's lanes (1 for an ABI 1 ring), as validated at open. */
uint32_t gpumem_ring_lanes(const gpumem_reader *r);
/* Copy up to `max` new records into the columns, the lanes merged by time; returns how many. *lost
 * is set to the records this call skipped because a writer lapped the reader (or abandoned them
 * mid-write), summed over the lanes. */
int64_t gpumem_ring_read(gpumem_reader *r, uint32_t max, double *time_us, uint8_t *action, int8_t *device,
                         uint8_t *phase, double *address, double *size, double *stream, double *extra,
                         uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost);

/* gpumem_ring_read, stopped at stream position `until` (UINT64_MAX: no stop); with `fold`, each
 * free_requested that its free_completed follows at once comes back as one GPUMEM_ACTION_FREE
 * record (ring_fold.c). Returns the records written to the columns; gpumem_ring_next tells how far
 * the stream was consumed. */
int64_t gpumem_ring_read_until(gpumem_reader *r, uint32_t max, uint64_t until, int fold, double *time_us, uint8_t *action,
                               int8_t *device, uint8_t *phase, double *address, double *size, double *stream, double *extra,
                               uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost);

#endif
