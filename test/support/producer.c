/*
 * A small ring producer for the reader's tests: writes a ring file the way the hook does, through
 * the same header (gpumem_ring_push, gpumem_totals_apply), from one or several threads.
 *
 *   producer PATH CAPACITY EVENTS [THREADS] [--abi N] [--magic N] [--delay-us N] [--pid N]
 *
 * Thread t writes EVENTS records on device t, alternating alloc and free_requested of the same
 * block; every record carries a checksum (extra = address ^ size ^ step) so that a reader can tell
 * a torn record from a whole one. Time is unix ns (clock_ns_per_tick = 0).
 */
#define _GNU_SOURCE
#include "gpumem_ring.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static gpumem_header *h;
static long events;
static long delay_us;

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
    gpumem_ring_push(h, &r);
    if (delay_us && i % 64 == 0) usleep((useconds_t)delay_us);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: producer PATH CAPACITY EVENTS [THREADS] [--abi N] [--magic N] [--delay-us N] [--pid N]\n");
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
    else threads = atoi(argv[i]);
  }
  size_t bytes = GPUMEM_HEADER_SIZE + capacity * GPUMEM_RECORD_SIZE;
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
  h->n_devices = (uint32_t)threads;
  h->pid = pid;
  h->mode = GPUMEM_MODE_HOOK;
  h->attach_ns = now_ns();
  /* Publish the file only once its header is whole, as the agent does. */
  if (rename(tmp, path) != 0) {
    perror("rename");
    return 1;
  }
  pthread_t t[GPUMEM_MAX_DEVICES];
  if (threads < 1 || threads > (int)GPUMEM_MAX_DEVICES) threads = 1;
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  h->closed = 1;
  printf("%llu\n", (unsigned long long)__atomic_load_n(&h->write_index, __ATOMIC_RELAXED));
  return 0;
}
