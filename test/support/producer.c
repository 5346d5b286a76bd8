/*
 * A small ring producer for the reader's tests: writes a ring file the way the hook does, through
 * the same header (gpumem_ring_push, gpumem_totals_apply), from one or several threads.
 *
 *   producer PATH CAPACITY EVENTS [THREADS] [--abi N] [--magic N] [--delay-us N] [--pid N] [--lanes]
 *   producer PATH CAPACITY EVENTS --replay RING --rate N [--pid N]
 *
 * Thread t writes EVENTS records on device t, alternating alloc and free_requested of the same
 * block; every record carries a checksum (extra = address ^ size ^ step) so that a reader can tell
 * a torn record from a whole one. Time is unix ns (clock_ns_per_tick = 0).
 *
 * --lanes: a ring of 1 + THREADS lanes, as the hook writes it: thread t's events go to device t's
 * own lane (the single-writer claim), and every 100th event each thread also writes a step mark
 * (device -1) on the shared lane, so several threads race for that lane's fetch-add.
 *
 * --replay RING: instead, write a recorded ring's steady state (its records from the first step mark
 * to the last) again and again on device 0, N records a second, times moved to now and steps on by
 * a lap's steps each lap: a real
 * training's mix of allocations, frees, segments and marks at a chosen rate, for benchmarks. Sync
 * records are written as unsure (their counts belong to the recording, not to this ring).
 */
#define _GNU_SOURCE
#include "gpumem_ring.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static gpumem_header *h;
static long events;
static long delay_us;
static const char *replay_path;
static double replay_rate;
static int lanes;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *writer(void *arg) {
  int device = (int)(intptr_t)arg;
  for (long i = 0; i < events; i++) {
    gpumem_record r;
    memset(&r, 0, sizeof r);
    uint64_t block = (uint64_t)(i / 2);
    r.action = (i % 2 == 0) ? GPUMEM_ACTION_ALLOC : GPUMEM_ACTION_FREE_REQUESTED;
    r.device = (int8_t)device;
    r.address = 0x7f0000000000ull + ((uint64_t)device << 36) + block * 512;
    r.size = 512 * (1 + block % 7);
    r.step = (uint32_t)(block / 100);
    r.phase = (uint8_t)(block % 4);
    r.range = (uint32_t)(block % 3);
    r.line = (uint32_t)(block % 5);
    r.stream = 7;
    r.extra = r.address ^ r.size ^ r.step;
    r.time = now_ns();
    gpumem_totals_apply(&h->totals[device], r.action, (int64_t)r.size);
    if (lanes) {
      gpumem_lane_write(h, (uint32_t)device, r.time, r.address, r.size, r.stream, r.extra, r.step, r.range, r.action, r.device,
                        r.phase, r.line);
      if (i % 100 == 0) {
        gpumem_record m;
        memset(&m, 0, sizeof m);
        m.action = GPUMEM_ACTION_STEP;
        m.device = -1;
        m.step = (uint32_t)i;
        m.extra = m.step;
        m.time = now_ns();
        gpumem_ring_push(h, &m);
      }
    } else {
      gpumem_ring_push(h, &r);
    }
    if (delay_us && i % 64 == 0) usleep((useconds_t)delay_us);
  }
  return NULL;
}

static uint64_t to_ns(const gpumem_header *src, uint64_t t) {
  if (src->clock_ns_per_tick == 0) return t;
  return (uint64_t)(src->clock_base_ns + (int64_t)(((double)((int64_t)t - src->clock_base_ticks)) * src->clock_ns_per_tick));
}

static int replay(void) {
  int fd = open(replay_path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    perror(replay_path);
    return 1;
  }
  const gpumem_header *src = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (src == MAP_FAILED || src->magic != GPUMEM_RING_MAGIC) {
    fprintf(stderr, "%s: not a ring\n", replay_path);
    return 1;
  }
  if (src->abi_version >= 2 && src->n_lanes > 1) {
    fprintf(stderr, "%s: a ring of %u lanes: replay a one-lane recording (python3 -m gpumem_agent.ring compact)\n", replay_path, src->n_lanes);
    return 1;
  }
  const gpumem_record *rec = (const gpumem_record *)((const uint8_t *)src + GPUMEM_HEADER_SIZE);
  uint64_t n = src->write_index < src->capacity ? src->write_index : src->capacity;
  uint64_t first = n, last = 0;
  for (uint64_t i = 0; i < n; i++)
    if (rec[i].action == GPUMEM_ACTION_STEP) {
      if (first == n) first = i;
      last = i;
    }
  if (first >= last) {
    fprintf(stderr, "%s: fewer than two step marks\n", replay_path);
    return 1;
  }
  uint64_t span = to_ns(src, rec[last].time) - to_ns(src, rec[first].time);
  /* Each lap goes on from the last one's steps, as a training's next steps do: a reader meets its
   * step and phase boundaries (steps going back would be records of the past to it). */
  uint32_t steps = rec[last].step - rec[first].step;
  uint64_t start = now_ns();
  for (long k = 0; k < events; k++) {
    uint64_t lap = (uint64_t)k / (last - first), j = first + (uint64_t)k % (last - first);
    gpumem_record r = rec[j];
    r.device = 0;
    r.step += (uint32_t)(lap * steps);
    r.time = to_ns(src, r.time) - to_ns(src, rec[first].time) + start + lap * span;
    if (r.action == GPUMEM_ACTION_SYNC) r.extra = GPUMEM_SYNC_UNSURE;
    gpumem_totals_apply(&h->totals[0], r.action, (int64_t)r.size);
    gpumem_ring_push(h, &r);
    if (k % 64 == 63) {
      /* Keep to the rate: sleep until the time the next record is due. */
      uint64_t due = start + (uint64_t)((double)(k + 1) / replay_rate * 1e9), now = now_ns();
      if (due > now) usleep((useconds_t)((due - now) / 1000));
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: producer PATH CAPACITY EVENTS [THREADS] [--abi N] [--magic N] [--delay-us N] [--pid N] [--lanes]\n"
                    "       producer PATH CAPACITY EVENTS --replay RING --rate N [--pid N]\n");
    return 2;
  }
  const char *path = argv[1];
  uint64_t capacity = strtoull(argv[2], NULL, 10);
  events = strtol(argv[3], NULL, 10);
  int threads = 1;
  uint32_t abi = GPUMEM_RING_ABI_VERSION;
  uint64_t magic = GPUMEM_RING_MAGIC;
  int32_t pid = (int32_t)getpid(); /* --pid: write on behalf of another process, as in a test */
  for (int i = 4; i < argc; i++) {
    if (!strcmp(argv[i], "--abi") && i + 1 < argc) abi = (uint32_t)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--magic") && i + 1 < argc) magic = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--delay-us") && i + 1 < argc) delay_us = strtol(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--pid") && i + 1 < argc) pid = (int32_t)strtol(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--replay") && i + 1 < argc) replay_path = argv[++i];
    else if (!strcmp(argv[i], "--rate") && i + 1 < argc) replay_rate = strtod(argv[++i], NULL);
    else if (!strcmp(argv[i], "--lanes")) lanes = 1;
    else threads = atoi(argv[i]);
  }
  if (threads < 1 || threads > (int)GPUMEM_MAX_DEVICES) threads = 1;
  const uint32_t n_lanes = lanes ? 1 + (uint32_t)threads : 1;
  size_t bytes = GPUMEM_HEADER_SIZE + n_lanes * capacity * GPUMEM_RECORD_SIZE;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
    perror(path);
    return 1;
  }
  h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (h == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  h->magic = magic;
  h->abi_version = abi;
  h->header_size = GPUMEM_HEADER_SIZE;
  h->record_size = GPUMEM_RECORD_SIZE;
  h->capacity = capacity;
  h->n_lanes = n_lanes;
  h->n_devices = (uint32_t)threads;
  h->pid = pid;
  h->mode = GPUMEM_MODE_HOOK;
  h->attach_ns = now_ns();
  /* Publish the file only once its header is whole, as the agent does. */
  if (rename(tmp, path) != 0) {
    perror("rename");
    return 1;
  }
  if (replay_path) {
    if (replay_rate <= 0) {
      fprintf(stderr, "--replay needs --rate N (records a second)\n");
      return 2;
    }
    h->n_devices = 1;
    int rc = replay();
    h->closed = 1;
    return rc;
  }
  pthread_t t[GPUMEM_MAX_DEVICES];
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  h->closed = 1;
  uint64_t written = __atomic_load_n(&h->write_index, __ATOMIC_RELAXED);
  for (uint32_t d = 0; d + 1 < n_lanes; d++) written += __atomic_load_n(&h->lanes[d].write_index, __ATOMIC_RELAXED);
  printf("%llu\n", (unsigned long long)written);
  return 0;
}
