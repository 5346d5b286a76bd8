/* The cost of one stack capture (cuda/pystack.c), timed inside one C call from a Python frame at a
 * chosen depth: the capture of a stack already interned (what every large allocation after the
 * first pays) and a loop with nothing in it beside it. Built and driven by bench/pystack_cost.py. */
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
