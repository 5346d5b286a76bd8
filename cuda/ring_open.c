/*
 * ring_open.c — opening a ring and checking everything the reader relies on (layout: gpumem_ring.h).
 *
 * A live ring is mapped shared, read-only, and read under the SIGBUS guard (ring_guard.c); a
 * recording (GPUMEM_RING_COPY, or a buffer in memory) is copied into private memory first, so that
 * nothing can change or cut it under the reader. Either way its header is checked before a record
 * is read (ring_read.c).
 */
#define _GNU_SOURCE
#include "ring_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t ring_bytes(const gpumem_header *h) {
  return GPUMEM_HEADER_SIZE + (uint64_t)lanes_of(h) * h->capacity * GPUMEM_RECORD_SIZE;
}

/* Everything the reader relies on, checked on a header (a copy, or the live one at open). */
static int check_header(const gpumem_header *h, uint64_t size, const char *name, char *err, int errlen) {
  if (h->magic != GPUMEM_RING_MAGIC) {
    snprintf(err, errlen, "%s is not a gpumem-tui ring (bad magic)", name);
    return GPUMEM_RING_E_FORMAT;
  }
  if (h->abi_version != 1 && h->abi_version != GPUMEM_RING_ABI_VERSION) {
    snprintf(err, errlen,
             "ring %s has ABI version %u, this monitor reads versions 1 and %u: use the gpumem-tui that "
             "matches the agent",
             name, h->abi_version, GPUMEM_RING_ABI_VERSION);
    return GPUMEM_RING_E_VERSION;
  }
  if (h->header_size != GPUMEM_HEADER_SIZE || h->record_size != GPUMEM_RECORD_SIZE || h->capacity == 0 ||
      (h->capacity & (h->capacity - 1)) != 0 || h->n_devices > GPUMEM_MAX_DEVICES ||
      h->capacity > GPUMEM_MAX_CAPACITY || lanes_of(h) > GPUMEM_MAX_LANES) {
    snprintf(err, errlen,
             "ring %s has an impossible geometry (header %u, record %u, capacity %llu of at most %u, devices %u, "
             "lanes %u of at most %u)",
             name, h->header_size, h->record_size, (unsigned long long)h->capacity, GPUMEM_MAX_CAPACITY,
             h->n_devices, lanes_of(h), GPUMEM_MAX_LANES);
    return GPUMEM_RING_E_FORMAT;
  }
  double tick = h->clock_ns_per_tick;
  if (!isfinite(tick) || tick < 0 || tick > 1e9) {
    snprintf(err, errlen, "ring %s has a clock calibration of %g ns a tick: not a finite, non-negative number",
             name, tick);
    return GPUMEM_RING_E_FORMAT;
  }
  for (uint32_t l = 0; l < lanes_of(h); l++) {
    if (lane_write_index(h, l) > GPUMEM_MAX_WRITE_INDEX) {
      snprintf(err, errlen, "ring %s: lane %u's write index %llu is past any writer's (2^53)", name, l,
               (unsigned long long)lane_write_index(h, l));
      return GPUMEM_RING_E_FORMAT;
    }
  }
  if (size < ring_bytes(h)) {
    snprintf(err, errlen, "ring %s is truncated: %llu bytes, its header promises %llu (%u lanes of %llu records)",
             name, (unsigned long long)size, (unsigned long long)ring_bytes(h), lanes_of(h),
             (unsigned long long)h->capacity);
    return GPUMEM_RING_E_TRUNCATED;
  }
  return 0;
}

/* Records the file holds from lane l's start to its first hole (UINT64_MAX: no hole in the lane).
 * A sparse file holds only what was written: a lane with a hole cannot have been written past it,
 * so a write index beyond is refused rather than read through gigabytes of nothing. */
uint64_t gpumem_held_records(int fd, uint64_t capacity, uint32_t l) {
  const uint64_t start = GPUMEM_HEADER_SIZE + (uint64_t)l * capacity * GPUMEM_RECORD_SIZE;
  const uint64_t end = start + capacity * GPUMEM_RECORD_SIZE;
  off_t hole = lseek(fd, (off_t)start, SEEK_HOLE);
  if (hole < 0 || (uint64_t)hole >= end) return UINT64_MAX; /* no hole, or a file system that cannot say */
  return ((uint64_t)hole - start) / GPUMEM_RECORD_SIZE;
}

/* The reader over `map` (the shared mapping, or a copy) whose header `checked` was checked (the
 * mapping's own for a copy; for a live ring the copy read before mapping, so that no check reads
 * a page the file may no longer have). `fd` >= 0: the file, for its holes. */
static int make_reader(const void *map, const gpumem_header *checked, size_t size, int fd, int copy, const char *name,
                       gpumem_reader **out, char *err, int errlen) {
  gpumem_reader *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, errlen, "out of memory");
    return GPUMEM_RING_E_OPEN;
  }
  const gpumem_header *h = (const gpumem_header *)map;
  r->h = h;
  r->map_size = size;
  r->fd = copy ? -1 : fd;
  r->copy = copy;
  r->capacity = checked->capacity;
  r->mask = checked->capacity - 1;
  r->n_lanes = lanes_of(checked);
  /* Every lane starts at record 0 (calloc): the first read counts what the ring no longer holds as
   * lost, so that a monitor attached late knows its block detail is partial. */
  const gpumem_record *recs = (const gpumem_record *)((const uint8_t *)map + GPUMEM_HEADER_SIZE);
  for (uint32_t l = 0; l < r->n_lanes; l++) {
    lane_state *s = &r->lane[l];
    s->recs = recs + (uint64_t)l * r->capacity;
    s->write_index = l == 0 ? &h->write_index : &h->lanes[l - 1].write_index;
    s->held = fd >= 0 ? gpumem_held_records(fd, r->capacity, l) : UINT64_MAX;
    const uint64_t w = lane_write_index(checked, l);
    if (!holds(s, w)) {
      snprintf(err, errlen, "ring %s: lane %u's write index %llu is past the %llu records its file holds (a sparse file)",
               name, l, (unsigned long long)w, (unsigned long long)s->held);
      free(r);
      return GPUMEM_RING_E_FORMAT;
    }
  }
  *out = r;
  return 0;
}

/* A private copy of `size` bytes: anonymous pages, only those written cost memory. */
static void *anon(size_t size) {
  void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return m == MAP_FAILED ? NULL : m;
}

/* The file's data (its holes stay zero) into `dst`: 0, or -1 where it ended early (cut meanwhile). */
static int copy_data(int fd, uint8_t *dst, uint64_t size) {
  uint64_t off = 0;
  while (off < size) {
    off_t data = lseek(fd, (off_t)off, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) return 0; /* nothing but a hole to the end */
      data = (off_t)off;            /* a file system that cannot say: all of it is data */
    }
    off_t hole = lseek(fd, data, SEEK_HOLE);
    uint64_t end = hole < 0 || (uint64_t)hole > size ? size : (uint64_t)hole;
    for (uint64_t at = (uint64_t)data; at < end;) {
      ssize_t got = pread(fd, dst + at, end - at, (off_t)at);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return -1;
      at += (uint64_t)got;
    }
    off = end;
  }
  return 0;
}

int gpumem_ring_open(const char *path, int flags, gpumem_reader **out, char *err, int errlen) {
  *out = NULL;
  /* Non-blocking: a FIFO given as a ring must not hang the open; it is refused below. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
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
  gpumem_header head;
  ssize_t got = (uint64_t)st.st_size < GPUMEM_HEADER_SIZE ? 0 : pread(fd, &head, sizeof head, 0);
  if (got != (ssize_t)sizeof head) {
    snprintf(err, errlen, "ring %s is truncated: %lld bytes, smaller than its %u-byte header", path,
             (long long)st.st_size, GPUMEM_HEADER_SIZE);
    close(fd);
    return GPUMEM_RING_E_TRUNCATED;
  }
  int rc = check_header(&head, (uint64_t)st.st_size, path, err, errlen);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  const size_t size = (size_t)st.st_size;
  const int copy = (flags & GPUMEM_RING_COPY) != 0;
  void *map;
  if (copy) {
    map = anon(size);
    if (map && copy_data(fd, map, size) != 0) {
      munmap(map, size);
      snprintf(err, errlen, "ring %s is truncated: it shrank while being read", path);
      close(fd);
      return GPUMEM_RING_E_TRUNCATED;
    }
    /* What was checked is what is read: the copy's own header, checked again. */
    if (map && (rc = check_header(map, size, path, err, errlen)) != 0) {
      munmap(map, size);
      close(fd);
      return rc;
    }
    if (map) mprotect(map, size, PROT_READ);
  } else {
    gpumem_guard_install();
    map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) map = NULL;
  }
  if (!map) {
    snprintf(err, errlen, "cannot map ring %s: %s", path, strerror(errno));
    close(fd);
    return GPUMEM_RING_E_OPEN;
  }
  rc = make_reader(map, copy ? (const gpumem_header *)map : &head, size, fd, copy, path, out, err, errlen);
  if (rc != 0) munmap(map, size);
  if (rc != 0 || copy) close(fd); /* a live ring keeps its file open: its holes are asked again */
  return rc;
}

int gpumem_ring_open_buffer(const void *data, uint64_t len, const char *name, gpumem_reader **out, char *err,
                            int errlen) {
  *out = NULL;
  if (len < GPUMEM_HEADER_SIZE) {
    snprintf(err, errlen, "ring %s is truncated: %llu bytes, smaller than its %u-byte header", name,
             (unsigned long long)len, GPUMEM_HEADER_SIZE);
    return GPUMEM_RING_E_TRUNCATED;
  }
  void *map = anon((size_t)len);
  if (!map) {
    snprintf(err, errlen, "out of memory for ring %s (%llu bytes)", name, (unsigned long long)len);
    return GPUMEM_RING_E_OPEN;
  }
  memcpy(map, data, (size_t)len);
  mprotect(map, (size_t)len, PROT_READ);
  int rc = check_header(map, len, name, err, errlen);
  if (rc == 0) rc = make_reader(map, map, (size_t)len, -1, 1, name, out, err, errlen);
  if (rc != 0) munmap(map, (size_t)len);
  return rc;
}

void gpumem_ring_close(gpumem_reader *r) {
  if (!r) return;
  munmap((void *)r->h, r->map_size);
  if (r->fd >= 0) close(r->fd);
  free(r);
}
