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

/* gpumem_ring_open's flags. */
enum {
  GPUMEM_RING_COPY = 1 /* read the file into private memory (a recording): nothing can change or cut it
                        * under the reader; without it the file is mapped shared (a live ring) */
};

/* Open `path` and validate it: 0 and *out set, or a GPUMEM_RING_E_* code and err set. A live ring
 * (no GPUMEM_RING_COPY) is mapped read-only; a file cut short under a read makes that read, and
 * every later one, fail with GPUMEM_RING_E_TRUNCATED instead of raising SIGBUS. Refused at open:
 * a file that is not regular (never waited on), a capacity past GPUMEM_MAX_CAPACITY, a clock
 * calibration that is not finite, a write index past 2^53 or past the records a sparse file holds. */
int gpumem_ring_open(const char *path, int flags, gpumem_reader **out, char *err, int errlen);
/* A ring held in memory (a decompressed recording): copied, then validated as gpumem_ring_open. */
int gpumem_ring_open_buffer(const void *data, uint64_t len, const char *name, gpumem_reader **out, char *err,
                            int errlen);
void gpumem_ring_close(gpumem_reader *r);
/* Copy the header (GPUMEM_HEADER_SIZE bytes; its fields change while the writer runs) into `dst`:
 * 0, or GPUMEM_RING_E_TRUNCATED where the file was cut. */
int gpumem_ring_header_copy(gpumem_reader *r, void *dst);
/* Records this reader has consumed (read or counted lost), summed over the lanes. */
uint64_t gpumem_ring_next(const gpumem_reader *r);
/* The ring's lanes (1 for an ABI 1 ring), as validated at open. */
uint32_t gpumem_ring_lanes(const gpumem_reader *r);
/* Copy up to `max` new records into the columns, the lanes merged by time; returns how many. *lost
 * is set to the records this call skipped because a writer lapped the reader (or abandoned them
 * mid-write), summed over the lanes. Negative: GPUMEM_RING_E_TRUNCATED (the file was cut) or
 * GPUMEM_RING_E_FORMAT (the live header's calibration or a write index went out of range). */
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
