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
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
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
  uint64_t held;               /* records the file holds from the lane's start (UINT64_MAX: all, no hole) */
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
static uint32_t lanes_of(const gpumem_header *h) {
  if (h->abi_version < 2 || h->n_lanes == 0) return 1;
  return h->n_lanes;
}

static uint64_t ring_bytes(const gpumem_header *h) {
  return GPUMEM_HEADER_SIZE + (uint64_t)lanes_of(h) * h->capacity * GPUMEM_RECORD_SIZE;
}

static uint64_t lane_write_index(const gpumem_header *h, uint32_t l) {
  return l == 0 ? h->write_index : h->lanes[l - 1].write_index;
}

/* A mapping a live ring's writer (or anyone with its file) may cut short: a read past the file's
 * new end raises SIGBUS. Reads of such a mapping run guarded: the handler jumps back to the read,
 * which then fails (GPUMEM_RING_E_TRUNCATED). A SIGBUS anywhere else goes to the handler that was
 * there before. Recordings are private copies and need none of this. */
/* volatile: only the handler reads them, so between a guard's begin and end (a memcpy the compiler
 * inlines) it sees no read, and dropped the store that arms the guard as dead (a header copy of a
 * cut ring then died of SIGBUS). */
static __thread sigjmp_buf *volatile guard_jmp;
static __thread const char *volatile guard_lo, *volatile guard_hi;
static struct sigaction prev_bus;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void on_bus(int sig, siginfo_t *si, void *uc) {
  const char *a = (const char *)si->si_addr;
  if (guard_jmp && a >= guard_lo && a < guard_hi) siglongjmp(*guard_jmp, 1);
  if (prev_bus.sa_flags & SA_SIGINFO) {
    prev_bus.sa_sigaction(sig, si, uc);
  } else if (prev_bus.sa_handler == SIG_DFL) {
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
  } else if (prev_bus.sa_handler != SIG_IGN) {
    prev_bus.sa_handler(sig);
  }
}

static void install_guard(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_bus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK; /* NODEFER: the jump leaves SIGBUS unblocked */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &prev_bus);
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
static uint64_t held_records(int fd, uint64_t capacity, uint32_t l) {
  const uint64_t start = GPUMEM_HEADER_SIZE + (uint64_t)l * capacity * GPUMEM_RECORD_SIZE;
  const uint64_t end = start + capacity * GPUMEM_RECORD_SIZE;
  off_t hole = lseek(fd, (off_t)start, SEEK_HOLE);
  if (hole < 0 || (uint64_t)hole >= end) return UINT64_MAX; /* no hole, or a file system that cannot say */
  return ((uint64_t)hole - start) / GPUMEM_RECORD_SIZE;
}

/* A write index the file can hold: a lane with a hole is written up to it, give or take the
 * records the shared lane's writers have claimed and not yet written (their page may follow). */
static int holds(const lane_state *s, uint64_t w) {
  return s->held == UINT64_MAX || w <= s->held + GPUMEM_STALL_LIMIT;
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
    s->held = fd >= 0 ? held_records(fd, r->capacity, l) : UINT64_MAX;
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
    pthread_once(&guard_once, install_guard);
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

/* Guarded reads of a live mapping: GUARD_BEGIN returns `fail` from the enclosing function when the
 * file is found cut (now, or at an earlier read). */
#define GUARD_BEGIN(r, fail)                                                  \
  sigjmp_buf env_;                                                            \
  if ((r)->broken) return (fail);                                             \
  if (!(r)->copy) {                                                           \
    if (sigsetjmp(env_, 0)) {                                                 \
      guard_jmp = NULL;                                                       \
      (r)->broken = 1;                                                        \
      return (fail);                                                          \
    }                                                                         \
    guard_lo = (const char *)(r)->h;                                          \
    guard_hi = guard_lo + (r)->map_size;                                      \
    guard_jmp = &env_;                                                        \
  }
#define GUARD_END() (guard_jmp = NULL)

int gpumem_ring_header_copy(gpumem_reader *r, void *dst) {
  GUARD_BEGIN(r, GPUMEM_RING_E_TRUNCATED);
  memcpy(dst, r->h, GPUMEM_HEADER_SIZE);
  GUARD_END();
  return 0;
}
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

static int64_t read_records(gpumem_reader *r, uint32_t max, double *time_us, uint8_t *action, int8_t *device,
                            uint8_t *phase, double *address, double *size, double *stream, double *extra,
                            uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost) {
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
      s->held = held_records(r->fd, r->capacity, l); /* the writer has written further since: ask the file again */
      if (!holds(s, s->w)) return GPUMEM_RING_E_FORMAT;
    }
    if (s->w < s->next) s->next = s->w; /* a writer restarted the ring: follow it */
    if (s->w - s->next > r->capacity) {
      lost_now += s->w - r->capacity - s->next;
      s->next = s->w - r->capacity;
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
    time_us[n] = to_us(&cal, copy.time);
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

int64_t gpumem_ring_read(gpumem_reader *r, uint32_t max, double *time_us, uint8_t *action, int8_t *device,
                         uint8_t *phase, double *address, double *size, double *stream, double *extra,
                         uint32_t *step, uint32_t *range, uint32_t *line, uint64_t *lost) {
  *lost = 0;
  GUARD_BEGIN(r, GPUMEM_RING_E_TRUNCATED);
  const int64_t n = read_records(r, max, time_us, action, device, phase, address, size, stream, extra, step, range,
                                 line, lost);
  GUARD_END();
  return n;
}
