/*
 * What one record costs the writer of a device's lane, apart from the rest of the hook: the ways
 * cuda/gpumem_ring.h can write it, each in a loop of its own over a real ring layout (two lanes of
 * the agent's default capacity, in memory), minimum ns per record over many runs.
 *   cc -std=c11 -O2 -I cuda bench/lane_write.c -o /tmp/lane_write && /tmp/lane_write
 * Variants:
 *   shared     the shared lane: atomic fetch-add claim, fill, publish (gpumem_ring_claim/publish)
 *   scalar     a device lane: plain claim, the record filled field by field, publish
 *   wide       a device lane: gpumem_lane_write (16-byte stores on x86-64)
 *   scalar-nopf, wide-nopf   the same without the write prefetch of a later slot
 */
#define _GNU_SOURCE
#include "gpumem_ring.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

#define FILL(r)                 \
  do {                          \
    (r)->time = t;              \
    (r)->address = a;           \
    (r)->size = s;              \
    (r)->stream = 7;            \
    (r)->extra = 0;             \
    (r)->step = h->cur_step;    \
    (r)->range = h->cur_range;  \
    (r)->action = 0;            \
    (r)->device = 0;            \
    (r)->phase = h->cur_phase;  \
    (r)->flags = 0;             \
    (r)->line = h->cur_line;    \
  } while (0)

__attribute__((noinline)) static void shared(gpumem_header *h, uint64_t t, uint64_t a, uint64_t s) {
  uint64_t i;
  gpumem_record *r = gpumem_ring_claim(h, &i);
  FILL(r);
  gpumem_ring_publish(r, i);
}

__attribute__((noinline)) static void scalar(gpumem_header *h, uint64_t t, uint64_t a, uint64_t s) {
  uint64_t i;
  gpumem_record *r = gpumem_lane_claim(h, 0, &i);
  FILL(r);
  gpumem_lane_publish(h, 0, r, i);
}

__attribute__((noinline)) static void wide(gpumem_header *h, uint64_t t, uint64_t a, uint64_t s) {
  gpumem_lane_write(h, 0, t, a, s, 7, 0, h->cur_step, h->cur_range, 0, 0, h->cur_phase, h->cur_line);
}

__attribute__((noinline)) static void scalar_nopf(gpumem_header *h, uint64_t t, uint64_t a, uint64_t s) {
  uint64_t i = __atomic_load_n(&h->lanes[0].write_index, __ATOMIC_RELAXED);
  gpumem_record *r = gpumem_lane_records(h, 1) + (i & (h->capacity - 1));
  __atomic_store_n(&r->seq, 0, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  FILL(r);
  gpumem_lane_publish(h, 0, r, i);
}

#if defined(__x86_64__) && defined(__SSE2__)
__attribute__((noinline)) static void wide_nopf(gpumem_header *h, uint64_t t, uint64_t a, uint64_t s) {
  const uint64_t i = __atomic_load_n(&h->lanes[0].write_index, __ATOMIC_RELAXED);
  __m128i *p = (__m128i *)(gpumem_lane_records(h, 1) + (i & (h->capacity - 1)));
  const uint64_t sr = (uint64_t)h->cur_step | ((uint64_t)h->cur_range << 32);
  const uint64_t codes = (uint64_t)h->cur_phase << 16 | ((uint64_t)h->cur_line << 32);
  _mm_store_si128(p, _mm_set_epi64x((long long)t, (long long)(i + 1)));
  __atomic_thread_fence(__ATOMIC_RELEASE);
  _mm_store_si128(p + 1, _mm_set_epi64x((long long)s, (long long)a));
  _mm_store_si128(p + 2, _mm_set_epi64x(0, 7));
  _mm_store_si128(p + 3, _mm_set_epi64x((long long)codes, (long long)sr));
  __atomic_store_n(&h->lanes[0].write_index, i + 1, __ATOMIC_RELEASE);
}
#endif

typedef void (*writer)(gpumem_header *, uint64_t, uint64_t, uint64_t);

int main(void) {
  const uint64_t cap = 1u << 18;
  const size_t bytes = GPUMEM_HEADER_SIZE + 2 * cap * GPUMEM_RECORD_SIZE;
  gpumem_header *h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (h == MAP_FAILED) return 1;
  memset(h, 0, bytes);
  h->capacity = cap;
  h->n_lanes = 2;
  h->cur_step = 7;
  h->cur_range = 3;
  const char *names[] = {"shared", "scalar", "wide", "scalar-nopf", "wide-nopf"};
#if defined(__x86_64__) && defined(__SSE2__)
  writer fns[] = {shared, scalar, wide, scalar_nopf, wide_nopf};
  const int n = 5;
#else
  writer fns[] = {shared, scalar, wide, scalar_nopf};
  const int n = 4;
#endif
  double best[5] = {1e9, 1e9, 1e9, 1e9, 1e9};
  const long events = 1000000;
  for (int rep = 0; rep < 40; rep++) {
    for (int v = 0; v < n; v++) { /* interleaved: a slow moment hits every variant */
      const double t0 = now_ns();
      for (long k = 0; k < events; k++) fns[v](h, (uint64_t)k, 0x7f0000000000ull + (uint64_t)(k & 63) * 4096, 512 * (uint64_t)(1 + (k & 15)));
      const double ns = (now_ns() - t0) / events;
      if (ns < best[v]) best[v] = ns;
    }
  }
  for (int v = 0; v < n; v++) printf("%-12s %6.2f ns/record\n", names[v], best[v]);
  return 0;
}
