/*
 * ring.c — the reader side of the event ring (layout: gpumem_ring.h).
 *
 * The monitor maps a ring file read-only and copies new records, in batches, straight into the
 * caller's typed-array columns (one FFI call per batch, not per event), converting the allocator's
 * clock to unix microseconds with the header's calibration on the way. A ring of several lanes
 * (gpumem_ring.h) is read as one stream: each read merges the lanes' available records by time.
 */
#define _GNU_SOURCE
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* One lane as this reader sees it: where it is, and the record at its head once copied whole. */
typedef struct lane_state {
  const gpumem_record *recs;
  const uint64_t *write_index; /* lane 0: the header's; lane 1 + d: lanes[d]'s */
  uint64_t next;               /* next index of this lane this reader wants */
  uint64_t w;                  /* its write index at this read */
  gpumem_record head;          /* record `next`, copied and checked, while the lane takes part in a read */
} lane_state;

struct gpumem_reader {
  const gpumem_header *h;
  size_t map_size;
  uint64_t mask;
  uint32_t n_lanes;
  lane_state lane[GPUMEM_MAX_LANES];
};

/* A record claimed but not yet published is waited for, unless the writer has since moved this
 * far past it (a writer that died mid-record must not stall the reader forever). */
#define GPUMEM_STALL_LIMIT 4096u

/* Lanes of a ring: ABI 1 rings are one lane (the n_lanes offset was padding), and so is 0. */
static uint32_t lanes_of(const gpumem_header *h) {
  if (h->abi_version < 2 || h->n_lanes == 0) return 1;
  return h->n_lanes;
}

static uint64_t ring_bytes(const gpumem_header *h) {
  return GPUMEM_HEADER_SIZE + (uint64_t)lanes_of(h) * h->capacity * GPUMEM_RECORD_SIZE;
}

int gpumem_ring_open(const char *path, gpumem_reader **out, char *err, int errlen) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open ring %s: %s", path, strerror(errno));
    return GPUMEM_RING_E_OPEN;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(err, errlen, "cannot stat ring %s: %s", path, strerror(errno));
    close(fd);
    return GPUMEM_RING_E_OPEN;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s is not a ring file (not a regular file)", path);
    close(fd);
    return GPUMEM_RING_E_FORMAT;
  }
  if ((uint64_t)st.st_size < GPUMEM_HEADER_SIZE) {
    snprintf(err, errlen, "ring %s is truncated: %lld bytes, smaller than its %u-byte header", path,
             (long long)st.st_size, GPUMEM_HEADER_SIZE);
    close(fd);
    return GPUMEM_RING_E_TRUNCATED;
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    snprintf(err, errlen, "cannot map ring %s: %s", path, strerror(errno));
    return GPUMEM_RING_E_OPEN;
  }
  const gpumem_header *h = (const gpumem_header *)map;
  int rc = 0;
  if (h->magic != GPUMEM_RING_MAGIC) {
    snprintf(err, errlen, "%s is not a gpumem-tui ring (bad magic)", path);
    rc = GPUMEM_RING_E_FORMAT;
  } else if (h->abi_version != 1 && h->abi_version != GPUMEM_RING_ABI_VERSION) {
    snprintf(err, errlen,
             "ring %s has ABI version %u, this monitor reads versions 1 and %u: use the gpumem-tui that "
             "matches the agent",
             path, h->abi_version, GPUMEM_RING_ABI_VERSION);
    rc = GPUMEM_RING_E_VERSION;
  } else if (h->header_size != GPUMEM_HEADER_SIZE || h->record_size != GPUMEM_RECORD_SIZE ||
             h->capacity == 0 || (h->capacity & (h->capacity - 1)) != 0 ||
             h->n_devices > GPUMEM_MAX_DEVICES || h->capacity > (1ull << 32) || lanes_of(h) > GPUMEM_MAX_LANES) {
    snprintf(err, errlen,
             "ring %s has an impossible geometry (header %u, record %u, capacity %llu, devices %u, lanes %u of "
             "at most %u)",
             path, h->header_size, h->record_size, (unsigned long long)h->capacity, h->n_devices, lanes_of(h),
             GPUMEM_MAX_LANES);
    rc = GPUMEM_RING_E_FORMAT;
  } else if ((uint64_t)st.st_size < ring_bytes(h)) {
    snprintf(err, errlen, "ring %s is truncated: %lld bytes, its header promises %llu (%u lanes of %llu records)",
             path, (long long)st.st_size, (unsigned long long)ring_bytes(h), lanes_of(h),
             (unsigned long long)h->capacity);
    rc = GPUMEM_RING_E_TRUNCATED;
  }
  if (rc != 0) {
    munmap(map, (size_t)st.st_size);
    return rc;
  }
  gpumem_reader *r = calloc(1, sizeof *r);
  if (!r) {
    munmap(map, (size_t)st.st_size);
    snprintf(err, errlen, "out of memory");
    return GPUMEM_RING_E_OPEN;
  }
  r->h = h;
  r->map_size = (size_t)st.st_size;
  r->mask = h->capacity - 1;
  r->n_lanes = lanes_of(h);
  /* Every lane starts at record 0 (calloc): the first read counts what the ring no longer holds as
   * lost, so that a monitor attached late knows its block detail is partial. */
  const gpumem_record *recs = (const gpumem_record *)((const uint8_t *)h + GPUMEM_HEADER_SIZE);
  for (uint32_t l = 0; l < r->n_lanes; l++) {
    r->lane[l].recs = recs + (uint64_t)l * h->capacity;
    r->lane[l].write_index = l == 0 ? &h->write_index : &h->lanes[l - 1].write_index;
  }
  *out = r;
  return 0;
}

void gpumem_ring_close(gpumem_reader *r) {
  if (!r) return;
  munmap((void *)r->h, r->map_size);
  free(r);
}

const void *gpumem_ring_header(const gpumem_reader *r) { return r->h; }
/* Records consumed (read or counted lost), all lanes together: the one position callers compare
 * with the header's write indexes summed. */
uint64_t gpumem_ring_next(const gpumem_reader *r) {
  uint64_t n = 0;
  for (uint32_t l = 0; l < r->n_lanes; l++) n += r->lane[l].next;
  return n;
}

uint32_t gpumem_ring_lanes(const gpumem_reader *r) { return r->n_lanes; }


static inline double to_us(const gpumem_header *h, uint64_t t) {
  if (h->clock_ns_per_tick == 0.0) return (double)t / 1000.0; /* time already in unix ns */
  double ns = (double)h->clock_base_ns + ((double)(int64_t)(t - (uint64_t)h->clock_base_ticks)) * h->clock_ns_per_tick;
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

int64_t gpumem_ring_read(gpumem_reader *r, uint32_t max, double *time_us, uint8_t *action, int8_t *device,
                         uint8_t *phase, double *address, double *size, double *stream, double *extra,
                         uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost) {
  const gpumem_header *h = r->h;
  uint64_t lost_now = 0;
  /* The lanes with a record to give now, each with its head copied: only they take part. */
  uint32_t live[GPUMEM_MAX_LANES];
  uint32_t n_live = 0;
  for (uint32_t l = 0; l < r->n_lanes; l++) {
    lane_state *s = &r->lane[l];
    s->w = __atomic_load_n(s->write_index, __ATOMIC_ACQUIRE);
    if (s->w < s->next) s->next = s->w; /* a writer restarted the ring: follow it */
    if (s->w - s->next > h->capacity) {
      lost_now += s->w - h->capacity - s->next;
      s->next = s->w - h->capacity;
    }
    if (max > 0 && fill_head(r, l, &lost_now)) live[n_live++] = l;
  }
  uint32_t n = 0;
  while (n < max && n_live > 0) {
    /* The smallest head first (ties: the lower lane, so the shared lane's marks lead). */
    uint32_t k = 0;
    for (uint32_t j = 1; j < n_live; j++) {
      const uint64_t tj = r->lane[live[j]].head.time, tk = r->lane[live[k]].head.time;
      if (tj < tk || (tj == tk && live[j] < live[k])) k = j;
    }
    lane_state *s = &r->lane[live[k]];
    const gpumem_record copy = s->head;
    s->next++;
    /* The lane's next head only if this batch goes on: what lies past a full batch (laps
     * included) is the next read's, as with one lane. */
    if (n + 1 < max && !fill_head(r, live[k], &lost_now)) live[k] = live[--n_live];
    time_us[n] = to_us(h, copy.time);
    action[n] = copy.action;
    device[n] = copy.device;
    phase[n] = copy.phase;
    address[n] = (double)copy.address;
    size[n] = (double)copy.size;
    stream[n] = (double)copy.stream;
    extra[n] = (double)copy.extra;
    step[n] = copy.step;
    range[n] = copy.range;
    line[n] = copy.line;
    n++;
  }
  *lost = lost_now;
  return n;
}
