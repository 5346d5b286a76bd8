/* The cost of the hook's Python stacks (cuda/pystack.c), timed inside one C call from Python:
 *   gpumem_bench_capture: one capture of a stack already interned (what every sampled allocation
 *     after the first from the same line pays), and the loop with nothing in it beside it;
 *   gpumem_bench_stream: a stream of allocations of the given sizes, each asking whether it carries
 *     a stack as the hook asks (gpumem_pystack_wanted, its device's countdown) and capturing where it
 *     does: ns per allocation at the enabled threshold and rate, and how many were taken.
 * Built and driven by bench/pystack_cost.py. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>

#include "pystack.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint32_t g_sink;

/* ns per iteration over n iterations: the capture, or (empty) the loop alone. */
double gpumem_bench_capture(int n, int empty) {
  uint64_t t0 = now_ns();
  for (int i = 0; i < n; i++) g_sink = empty ? (uint32_t)i : gpumem_pystack_capture();
  return (double)(now_ns() - t0) / n;
}

/* ns per allocation over n allocations cycling through sizes[0..n_sizes); *taken: how many carried a
 * stack. With min 0 (stacks off) only the hook's check of the threshold is left. */
double gpumem_bench_stream(int n, const uint64_t *sizes, int n_sizes, uint64_t *taken) {
  const uint64_t min = gpumem_pystack_min_bytes();
  uint64_t t = 0;
  uint64_t t0 = now_ns();
  for (int i = 0, k = 0; i < n; i++, k = k + 1 == n_sizes ? 0 : k + 1) {
    if (min != 0 && gpumem_pystack_wanted(0, sizes[k], min)) {
      g_sink = gpumem_pystack_capture();
      t++;
    }
  }
  *taken = t;
  return (double)(now_ns() - t0) / n;
}
