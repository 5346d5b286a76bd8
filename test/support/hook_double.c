/*
 * A stand-in for the allocator hook (cuda/hook.cpp) on a machine without torch: the same extern "C"
 * functions, which the agent loads with ctypes and drives as it drives the hook, writing the ring
 * through the same header. Where the hook is called by PyTorch (allocator events, record_function
 * ranges), this one is called by the test program (gpumem_double_*): the agent's own code paths,
 * from attach to its close at exit, run on a CPU. Built as a shared library by test/support/native.ts.
 */
#define _GNU_SOURCE
#include "gpumem_ring.h"
#include "pystack.h" /* cuda/pystack.c, built in with the double: the stacks the hook will capture */

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANGES 64

static gpumem_header *g_h;
static char g_names[MAX_RANGES][128];
static uint32_t g_count;
static uint32_t g_stack[MAX_RANGES];
static int g_depth;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void push_mark(uint8_t action, uint32_t range, uint64_t extra) {
  gpumem_record r;
  memset(&r, 0, sizeof r);
  r.action = action;
  r.extra = extra;
  r.time = now_ns();
  r.phase = g_h->cur_phase;
  r.step = g_h->cur_step;
  r.range = range;
  r.device = -1;
  gpumem_ring_push(g_h, &r);
}

int gpumem_hook_attach(const char *ring_path, int tracker) {
  (void)tracker;
  int fd = open(ring_path, O_RDWR | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return -1;
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return -1;
  g_h = (gpumem_header *)map;
  g_h->mode = GPUMEM_MODE_HOOK;
  return 0;
}

void gpumem_hook_detach(void) {
  if (!g_h) return;
  g_h->closed = 1;
  g_h = NULL; /* the mapping stays until the process ends, as the hook's does */
}

/* Time is unix ns: one tick is one ns. */
void gpumem_hook_calibrate(int ms, int64_t *base_ticks, int64_t *base_ns, double *ns_per_tick) {
  (void)ms;
  *base_ticks = *base_ns = (int64_t)now_ns();
  *ns_per_tick = 1.0;
}

void gpumem_hook_mark(uint8_t action, uint8_t phase, uint32_t step) {
  if (!g_h) return;
  g_h->cur_phase = phase;
  g_h->cur_step = step;
  /* as the hook: entering backward or the optimizer's step carries the caller's stack */
  const int caller = action == GPUMEM_ACTION_PHASE && (phase == GPUMEM_PHASE_BACKWARD || phase == GPUMEM_PHASE_OPTIMIZER);
  push_mark(action, g_h->cur_range, caller && gpumem_pystack_min_bytes() ? gpumem_pystack_capture() : 0);
}

uint32_t gpumem_hook_range_count(void) { return g_count; }

int gpumem_hook_range_name(uint32_t id, char *buf, int len) {
  if (id == 0 || id > g_count || len <= 0) return -1;
  snprintf(buf, (size_t)len, "%s", g_names[id - 1]);
  return 0;
}

/* --- the test program's side: what PyTorch would call ------------------------------------------ */

/* record_function's enter: the name interned (ids from 1, in order of first use), the range current. */
void gpumem_double_range_enter(const char *name) {
  if (!g_h || g_depth == MAX_RANGES) return;
  uint32_t id = 0;
  for (uint32_t i = 0; i < g_count; i++)
    if (strcmp(g_names[i], name) == 0) id = i + 1;
  if (id == 0 && g_count < MAX_RANGES) {
    snprintf(g_names[g_count], sizeof g_names[0], "%s", name);
    id = ++g_count;
  }
  g_stack[g_depth++] = id;
  g_h->cur_range = id;
  push_mark(GPUMEM_ACTION_RANGE_ENTER, id, 0);
}

void gpumem_double_range_exit(void) {
  if (!g_h || g_depth == 0) return;
  uint32_t left = g_stack[--g_depth];
  g_h->cur_range = g_depth ? g_stack[g_depth - 1] : 0;
  push_mark(GPUMEM_ACTION_RANGE_EXIT, left, 0);
}

/* What the hook records beyond the events: the Python stacks of large allocations where this
 * build knows the interpreter's frames. */
uint32_t gpumem_hook_features(void) {
  return (gpumem_pystack_supported() ? GPUMEM_FEATURE_ALLOC_STACKS : 0u) | GPUMEM_FEATURE_SYNC_POINTS | GPUMEM_FEATURE_VALUES;
}

/* The hook's mark with values (a step's input shape, the allocator's limit). */
void gpumem_hook_value(uint8_t action, int8_t device, uint64_t address, uint64_t size, uint64_t extra) {
  if (!g_h) return;
  gpumem_record r;
  memset(&r, 0, sizeof r);
  r.action = action;
  r.time = now_ns();
  r.address = address;
  r.size = size;
  r.extra = extra;
  r.phase = g_h->cur_phase;
  r.step = g_h->cur_step;
  r.range = g_h->cur_range;
  r.device = device;
  gpumem_ring_push(g_h, &r);
}

/* A sync point as the hook writes one: each device that holds anything, its SYNC then its
 * SYNC_PEAKS, the figures the header's totals (the double's "allocator statistics"). */
void gpumem_hook_sync_point(uint32_t point) {
  if (!g_h) return;
  for (uint32_t dev = 0; dev < g_h->n_devices && dev < GPUMEM_MAX_DEVICES; dev++) {
    const gpumem_totals *t = &g_h->totals[dev];
    if (t->reserved == 0 && t->n_alloc == 0) continue;
    gpumem_record r;
    memset(&r, 0, sizeof r);
    r.action = GPUMEM_ACTION_SYNC;
    r.device = (int8_t)dev;
    r.time = now_ns();
    r.address = (uint64_t)t->allocated;
    r.size = (uint64_t)t->reserved;
    r.stream = (uint64_t)t->requested;
    r.extra = (uint64_t)(t->n_alloc + t->n_free);
    r.phase = g_h->cur_phase;
    r.step = g_h->cur_step;
    r.range = g_h->cur_range;
    gpumem_ring_push(g_h, &r);
    r.action = GPUMEM_ACTION_SYNC_PEAKS;
    r.address = (uint64_t)t->peak_allocated;
    r.size = (uint64_t)t->peak_reserved;
    r.stream = (uint64_t)t->active;
    r.extra = point & 0xff;
    gpumem_ring_push(g_h, &r);
  }
}

/* Stacks for allocations of at least min_bytes (0: off), smaller ones sampled at one per
 * sample_bytes, their count and their text (pystack.h). */
int gpumem_hook_stacks(uint64_t min_bytes, uint64_t sample_bytes) { return gpumem_pystack_enable(min_bytes, sample_bytes); }
int gpumem_hook_stack_rule(const char *library, const char *user) { return gpumem_pystack_rule(library, user); }
uint32_t gpumem_hook_stack_count(void) { return gpumem_pystack_count(); }
int gpumem_hook_stack_text(uint32_t id, char *buf, int len) { return gpumem_pystack_text(id, buf, len); }

/* An allocator event of `device`, stamped with where the loop is, into the device's lane. Called as
 * PyTorch calls its trackers: on the allocating thread, the GIL released around the op. */
void gpumem_double_event(uint8_t action, int8_t device, uint64_t address, uint64_t size) {
  if (!g_h || device < 0 || (uint32_t)device >= g_h->n_devices) return;
  gpumem_totals_apply(&g_h->totals[device], action, (int64_t)size);
  const uint64_t min = gpumem_pystack_min_bytes();
  uint64_t stack = action == GPUMEM_ACTION_ALLOC && min && gpumem_pystack_wanted((uint32_t)device, size, min) ? gpumem_pystack_capture() : 0;
  if (action == GPUMEM_ACTION_OOM) {
    /* as the hook: `address` (the caller's free bytes) goes to extra, the request's stack to address */
    stack = address;
    address = min ? gpumem_pystack_capture() : 0;
  }
  if ((uint32_t)device + 1 < g_h->n_lanes) {
    gpumem_lane_write(g_h, (uint32_t)device, now_ns(), address, size, 0, stack, g_h->cur_step, g_h->cur_range, action, device,
                      g_h->cur_phase, g_h->cur_line);
    return;
  }
  gpumem_record r;
  memset(&r, 0, sizeof r);
  r.time = now_ns();
  r.address = address;
  r.size = size;
  r.step = g_h->cur_step;
  r.range = g_h->cur_range;
  r.extra = stack;
  r.action = action;
  r.device = device;
  r.phase = g_h->cur_phase;
  r.line = g_h->cur_line;
  gpumem_ring_push(g_h, &r);
}

/* `n` such events from one call, one a size, as an op that makes many blocks makes them (the
 * calling Python frame the same for each): the stacks test's million allocations without a
 * Python call around each (test/agent/test_stacks.py). */
void gpumem_double_events(uint8_t action, int8_t device, uint64_t address, const uint64_t *sizes, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) gpumem_double_event(action, device, address, sizes[i]);
}
