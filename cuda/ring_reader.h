/*
 * ring_reader.h — what the reader's own files share (not part of libgpumem's interface: ring.h is).
 *
 * The reader is split by job: ring_open.c opens and validates a ring, ring_guard.c keeps reads of a
 * live mapping from dying of SIGBUS (and copies the header under it), ring_read.c reads records in
 * batches (the frees folded on the way where asked), ring_fold.c reads up to a position. Names declared here are
 * hidden: the library exports only what ring.h declares.
 */
#ifndef GPUMEM_RING_READER_INTERNAL_H
#define GPUMEM_RING_READER_INTERNAL_H

#include "ring.h"

#include <setjmp.h>
#include <stddef.h>

#define GPUMEM_HIDDEN __attribute__((visibility("hidden")))

/* One lane as this reader sees it: where it is, and the record at its head once copied whole. */
typedef struct lane_state {
  const gpumem_record *recs;
  const uint64_t *write_index; /* lane 0: the header's; lane 1 + d: lanes[d]'s */
  uint64_t next;               /* next index of this lane this reader wants */
  uint64_t w;                  /* its write index at this read */
  uint64_t held;               /* records the file holds from the lane's start (UINT64_MAX: all, no hole) */
  uint64_t released;           /* a live lane's records before this were given back (ring_read.c), a page's worth a time */
  gpumem_record head;          /* record `next`, copied and checked, while the lane takes part in a read */
} lane_state;

struct gpumem_reader {
  const gpumem_header *h;
  size_t map_size;
  int fd;        /* a live ring's file, kept for its holes (-1 for a copy) */
  int copy;      /* 1: the ring is a private copy in memory; 0: the file mapped shared (live) */
  int broken;    /* the file shrank under a read: every later call refuses */
  uint64_t capacity;
  uint64_t mask;
  uint32_t n_lanes;
  lane_state lane[GPUMEM_MAX_LANES];
};

/* A record claimed but not yet published is waited for, unless the writer has since moved this
 * far past it (a writer that died mid-record must not stall the reader forever). */
#define GPUMEM_STALL_LIMIT 4096u

/* The largest write index taken: past 2^53 a count is not exact where the monitor keeps it (a
 * double), and no writer reaches it (a million records a second for 285 years). */
#define GPUMEM_MAX_WRITE_INDEX (1ull << 53)

/* Lanes of a ring: ABI 1 rings are one lane (the n_lanes offset was padding), and so is 0. */
static inline uint32_t lanes_of(const gpumem_header *h) {
  if (h->abi_version < 2 || h->n_lanes == 0) return 1;
  return h->n_lanes;
}

static inline uint64_t lane_write_index(const gpumem_header *h, uint32_t l) {
  return l == 0 ? h->write_index : h->lanes[l - 1].write_index;
}

/* A write index the file can hold: a lane with a hole is written up to it, give or take the
 * records the shared lane's writers have claimed and not yet written (their page may follow). */
static inline int holds(const lane_state *s, uint64_t w) {
  return s->held == UINT64_MAX || w <= s->held + GPUMEM_STALL_LIMIT;
}

/* gpumem_ring_read's body (ring_read.c), with the frees folded as they are read where `fold` is set. */
GPUMEM_HIDDEN int64_t gpumem_read_columns(gpumem_reader *r, uint32_t max, int fold, double *time_us, uint8_t *action,
                                          int8_t *device, uint8_t *phase, double *address, double *size, double *stream,
                                          double *extra, uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost);

/* Records the file holds from lane l's start to its first hole (ring_open.c). */
GPUMEM_HIDDEN uint64_t gpumem_held_records(int fd, uint64_t capacity, uint32_t l);

/* The SIGBUS guard (ring_guard.c): installed once before a live ring is first mapped; armed over a
 * read of the mapping [lo, hi) with the jump back into that read, disarmed after it. */
GPUMEM_HIDDEN void gpumem_guard_install(void);
GPUMEM_HIDDEN void gpumem_guard_arm(sigjmp_buf *env, const void *lo, size_t len);
GPUMEM_HIDDEN void gpumem_guard_disarm(void);

/* Guarded reads of a live mapping: GUARD_BEGIN returns `fail` from the enclosing function when the
 * file is found cut (now, or at an earlier read). sigsetjmp must run in the reading function's own
 * frame (the handler jumps back into it), hence a macro around the guard's calls. */
#define GUARD_BEGIN(r, fail)                                                  \
  sigjmp_buf env_;                                                            \
  if ((r)->broken) return (fail);                                             \
  if (!(r)->copy) {                                                           \
    if (sigsetjmp(env_, 0)) {                                                 \
      gpumem_guard_disarm();                                                  \
      (r)->broken = 1;                                                        \
      return (fail);                                                          \
    }                                                                         \
    gpumem_guard_arm(&env_, (r)->h, (r)->map_size);                           \
  }
#define GUARD_END() gpumem_guard_disarm()

#endif
