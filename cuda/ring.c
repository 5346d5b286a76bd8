/*
 * ring.c — the reader side of the event ring (layout: gpumem_ring.h).
 *
 * The monitor maps a ring file read-only and copies new records, in batches, straight into the
 * caller's typed-array columns (one FFI call per batch, not per event), converting the allocator's
 * clock to unix microseconds with the header's calibration on the way.
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

struct gpumem_reader {
  const gpumem_header *h;
  size_t map_size;
  uint64_t next;     /* next index this reader wants */
  uint64_t mask;
};

/* A record claimed but not yet published is waited for, unless the writer has since moved this
 * far past it (a writer that died mid-record must not stall the reader forever). */
#define GPUMEM_STALL_LIMIT 4096u

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
  } else if (h->abi_version != GPUMEM_RING_ABI_VERSION) {
    snprintf(err, errlen,
             "ring %s has ABI version %u, this monitor reads version %u: use the gpumem-tui that matches "
             "the agent",
             path, h->abi_version, GPUMEM_RING_ABI_VERSION);
    rc = GPUMEM_RING_E_VERSION;
  } else if (h->header_size != GPUMEM_HEADER_SIZE || h->record_size != GPUMEM_RECORD_SIZE ||
             h->capacity == 0 || (h->capacity & (h->capacity - 1)) != 0 ||
             h->n_devices > GPUMEM_MAX_DEVICES || h->capacity > (1ull << 32)) {
    snprintf(err, errlen, "ring %s has an impossible geometry (header %u, record %u, capacity %llu, devices %u)",
             path, h->header_size, h->record_size, (unsigned long long)h->capacity, h->n_devices);
    rc = GPUMEM_RING_E_FORMAT;
  } else if ((uint64_t)st.st_size < GPUMEM_HEADER_SIZE + h->capacity * GPUMEM_RECORD_SIZE) {
    snprintf(err, errlen, "ring %s is truncated: %lld bytes, its header promises %llu", path,
             (long long)st.st_size, (unsigned long long)(GPUMEM_HEADER_SIZE + h->capacity * GPUMEM_RECORD_SIZE));
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
  /* Start at record 0: the first read counts what the ring no longer holds as lost, so that a
   * monitor attached late knows its block detail is partial. */
  r->next = 0;
  *out = r;
  return 0;
}

void gpumem_ring_close(gpumem_reader *r) {
  if (!r) return;
  munmap((void *)r->h, r->map_size);
  free(r);
}

const void *gpumem_ring_header(const gpumem_reader *r) { return r->h; }
uint64_t gpumem_ring_next(const gpumem_reader *r) { return r->next; }

static inline double to_us(const gpumem_header *h, uint64_t t) {
  if (h->clock_ns_per_tick == 0.0) return (double)t / 1000.0; /* time already in unix ns */
  double ns = (double)h->clock_base_ns + ((double)(int64_t)(t - (uint64_t)h->clock_base_ticks)) * h->clock_ns_per_tick;
  return ns / 1000.0;
}

int64_t gpumem_ring_read(gpumem_reader *r, uint32_t max, double *time_us, uint8_t *action, int8_t *device,
                         uint8_t *phase, double *address, double *size, double *stream, double *extra,
                         uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost) {
  const gpumem_header *h = r->h;
  const gpumem_record *recs = (const gpumem_record *)((const uint8_t *)h + GPUMEM_HEADER_SIZE);
  uint64_t w = __atomic_load_n(&h->write_index, __ATOMIC_ACQUIRE);
  uint64_t lost_now = 0;
  if (w < r->next) r->next = w; /* a writer restarted the ring: follow it */
  if (w - r->next > h->capacity) {
    lost_now += w - h->capacity - r->next;
    r->next = w - h->capacity;
  }
  uint32_t n = 0;
  while (n < max && r->next < w) {
    uint64_t i = r->next;
    const gpumem_record *src = &recs[i & r->mask];
    uint64_t seq = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
    if (seq != i + 1) {
      if (seq > i + 1 || w - i > GPUMEM_STALL_LIMIT) { /* lapped, or abandoned mid-write */
        lost_now++;
        r->next++;
        continue;
      }
      break; /* claimed, not yet published: take it next time */
    }
    gpumem_record copy;
    memcpy(&copy, src, sizeof copy);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&src->seq, __ATOMIC_RELAXED) != i + 1) { /* overwritten while copying */
      lost_now++;
      r->next++;
      continue;
    }
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
    r->next++;
  }
  *lost = lost_now;
  return n;
}
