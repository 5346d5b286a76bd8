/*
 * ring_read.c — the reader side of the event ring: records in batches (layout: gpumem_ring.h).
 *
 * The monitor copies new records, in batches, straight into the caller's typed-array columns (one
 * FFI call per batch, not per event), converting the allocator's clock to unix microseconds with
 * the header's calibration on the way. A ring of several lanes (gpumem_ring.h) is read as one
 * stream: each read merges the lanes' available records by time. Opening: ring_open.c; a live
 * ring's reads run under ring_guard.c's SIGBUS guard.
 */
#define _GNU_SOURCE
#include "ring_reader.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Records consumed (read or counted lost), all lanes together: the one position callers compare
 * with the header's write indexes summed. */
uint64_t gpumem_ring_next(const gpumem_reader *r) {
  uint64_t n = 0;
  for (uint32_t l = 0; l < r->n_lanes; l++) n += r->lane[l].next;
  return n;
}

uint32_t gpumem_ring_lanes(const gpumem_reader *r) { return r->n_lanes; }

/* The header's clock calibration, read once a batch. */
typedef struct calibration {
  int64_t base_ticks, base_ns;
  double ns_per_tick;
} calibration;

static inline double to_us(const calibration *c, uint64_t t) {
  if (c->ns_per_tick == 0.0) return (double)t / 1000.0; /* time already in unix ns */
  double ns = (double)c->base_ns + ((double)(int64_t)(t - (uint64_t)c->base_ticks)) * c->ns_per_tick;
  return ns / 1000.0;
}

/* Bring lane `l` to its next whole record (copied into its head), counting the lapped ones as
 * lost. 0 when it has none now: empty, or (lane 0, the only lane of several writers) a record
 * claimed and not yet published, which is waited for. */
static int fill_head(gpumem_reader *r, uint32_t l, uint64_t *lost) {
  lane_state *s = &r->lane[l];
  while (s->next < s->w) {
    uint64_t i = s->next;
    const gpumem_record *src = &s->recs[i & r->mask];
    uint64_t seq = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
    if (seq != i + 1) {
      /* A device lane publishes before it moves its write index: anything but i + 1 is a lap. */
      if (l != 0 || seq > i + 1 || s->w - i > GPUMEM_STALL_LIMIT) { /* lapped, or abandoned mid-write */
        (*lost)++;
        s->next++;
        continue;
      }
      return 0; /* claimed, not yet published: take it next time */
    }
    memcpy(&s->head, src, sizeof s->head);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&src->seq, __ATOMIC_RELAXED) != i + 1) { /* overwritten while copying */
      (*lost)++;
      s->next++;
      continue;
    }
    return 1;
  }
  return 0;
}

/* The records read, as columns (the caller's typed arrays). */
typedef struct columns {
  double *time_us;
  uint8_t *action;
  int8_t *device;
  uint8_t *phase;
  double *address, *size, *stream, *extra;
  uint32_t *step, *range, *line;
} columns;

/* Up to `max` records consumed into `c`; returns the records written. With `fold`, a free_completed
 * that follows its own free_requested at once (same block, size and device) is written into that
 * record as it is read (ring_fold.c says why), so the columns are written once and never moved. */
static int64_t read_records(gpumem_reader *r, uint32_t max, int fold, const columns *c, uint64_t *lost) {
  const gpumem_header *h = r->h;
  /* A live header may be rewritten: what a batch relies on is checked at every read. */
  const calibration cal = {h->clock_base_ticks, h->clock_base_ns, h->clock_ns_per_tick};
  if (!isfinite(cal.ns_per_tick) || cal.ns_per_tick < 0 || cal.ns_per_tick > 1e9) return GPUMEM_RING_E_FORMAT;
  uint64_t lost_now = 0;
  /* The lanes with a record to give now, each with its head copied: only they take part. */
  uint32_t live[GPUMEM_MAX_LANES];
  uint32_t n_live = 0;
  for (uint32_t l = 0; l < r->n_lanes; l++) {
    lane_state *s = &r->lane[l];
    s->w = __atomic_load_n(s->write_index, __ATOMIC_ACQUIRE);
    if (s->w > GPUMEM_MAX_WRITE_INDEX) return GPUMEM_RING_E_FORMAT;
    if (!holds(s, s->w)) {
      s->held = gpumem_held_records(r->fd, r->capacity, l); /* the writer has written further since: ask the file again */
      if (!holds(s, s->w)) return GPUMEM_RING_E_FORMAT;
    }
    if (s->w < s->next) s->next = s->w; /* a writer restarted the ring: follow it */
    if (s->w - s->next > r->capacity) {
      lost_now += s->w - r->capacity - s->next;
      s->next = s->w - r->capacity;
    }
    if (max > 0 && fill_head(r, l, &lost_now)) live[n_live++] = l;
  }
  uint32_t consumed = 0;
  uint32_t n = 0;
  while (consumed < max && n_live > 0) {
    /* The smallest head first (ties: the lower lane, so the shared lane's marks lead). */
    uint32_t k = 0;
    for (uint32_t j = 1; j < n_live; j++) {
      const uint64_t tj = r->lane[live[j]].head.time, tk = r->lane[live[k]].head.time;
      if (tj < tk || (tj == tk && live[j] < live[k])) k = j;
    }
    lane_state *s = &r->lane[live[k]];
    const gpumem_record *rec = &s->head;
    const double t = to_us(&cal, rec->time);
    if (fold && rec->action == GPUMEM_ACTION_FREE_COMPLETED && n > 0 && c->action[n - 1] == GPUMEM_ACTION_FREE_REQUESTED &&
        c->address[n - 1] == (double)rec->address && c->size[n - 1] == (double)rec->size && c->device[n - 1] == rec->device) {
      c->action[n - 1] = GPUMEM_ACTION_FREE;
      c->extra[n - 1] = t; /* when the free completed: nothing of the pair is lost */
    } else {
      c->time_us[n] = t;
      c->action[n] = rec->action;
      c->device[n] = rec->device;
      c->phase[n] = rec->phase;
      c->address[n] = (double)rec->address;
      c->size[n] = (double)rec->size;
      c->stream[n] = (double)rec->stream;
      c->extra[n] = (double)rec->extra;
      c->step[n] = rec->step;
      c->range[n] = rec->range;
      c->line[n] = rec->line;
      n++;
    }
    s->next++;
    consumed++;
    /* The lane's next head only if this batch goes on: what lies past a full batch (laps
     * included) is the next read's, as with one lane. */
    if (consumed < max && !fill_head(r, live[k], &lost_now)) live[k] = live[--n_live];
  }
  *lost = lost_now;
  return n;
}

/* A live ring's records once read are given back a stretch at a time: MADV_DONTNEED on the shared
 * mapping drops this process's pages of them (the file keeps the records; a later lap of the writer
 * is faulted in again from it). Without it a monitor following a busy training keeps every page of
 * every lane it ever read resident, 64 MiB a lane at the agent's default capacity, a third of its
 * resident set; with it, at most RELEASE_BYTES and a page a lane. A private copy (a recording) is
 * never released: there the call would zero it. */
#define RELEASE_BYTES (1u << 20)

static void give_back(const gpumem_record *from, uint64_t count) {
  if (count > 0) madvise((void *)from, (size_t)(count * GPUMEM_RECORD_SIZE), MADV_DONTNEED);
}

static void release_read(gpumem_reader *r) {
  const uint64_t per_page = (uint64_t)sysconf(_SC_PAGESIZE) / GPUMEM_RECORD_SIZE;
  /* Lanes start page-aligned (the header is a page, a lane a power-of-two count of records); a lane
   * smaller than a page is left alone. */
  if (per_page == 0 || r->capacity < per_page || (GPUMEM_HEADER_SIZE / GPUMEM_RECORD_SIZE) % per_page != 0) return;
  for (uint32_t l = 0; l < r->n_lanes; l++) {
    lane_state *s = &r->lane[l];
    if (s->next < s->released) s->released = s->next - s->next % per_page; /* a writer restarted the ring */
    const uint64_t to = s->next - s->next % per_page;                         /* whole pages only */
    if ((to - s->released) * GPUMEM_RECORD_SIZE < RELEASE_BYTES) continue;
    const uint64_t n = to - s->released > r->capacity ? r->capacity : to - s->released;
    const uint64_t at = (to - n) & r->mask;
    const uint64_t first = n < r->capacity - at ? n : r->capacity - at;
    give_back(s->recs + at, first);
    give_back(s->recs, n - first); /* the part past the lane's end, from its start */
    s->released = to;
  }
}

/* read_records under the SIGBUS guard of a live ring. */
int64_t gpumem_read_columns(gpumem_reader *r, uint32_t max, int fold, double *time_us, uint8_t *action, int8_t *device,
                            uint8_t *phase, double *address, double *size, double *stream, double *extra, uint32_t *step,
                            uint32_t *range, uint32_t *line, uint64_t *lost) {
  const columns c = {time_us, action, device, phase, address, size, stream, extra, step, range, line};
  *lost = 0;
  GUARD_BEGIN(r, GPUMEM_RING_E_TRUNCATED);
  const int64_t n = read_records(r, max, fold, &c, lost);
  GUARD_END();
  if (!r->copy && n >= 0) release_read(r);
  return n;
}

int64_t gpumem_ring_read(gpumem_reader *r, uint32_t max, double *time_us, uint8_t *action, int8_t *device,
                         uint8_t *phase, double *address, double *size, double *stream, double *extra,
                         uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost) {
  return gpumem_read_columns(r, max, 0, time_us, action, device, phase, address, size, stream, extra, step, range, line, lost);
}
