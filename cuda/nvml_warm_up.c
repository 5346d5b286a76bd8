/*
 * nvml_warm_up.c — NVML's start on a thread of its own (gpumem_nvml_init_async), and the sample it
 * takes, kept for a one-shot (gpumem_nvml_take_kept).
 */
#define _GNU_SOURCE
#include "nvml_lib.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

/* nvmlInit and each query's first call are slow on a GSP-based GPU (an H100: ~9 ms for init, and
 * first calls of 0.4 to 3.7 ms: the utilization, temperature, clock and max-clock queries). A
 * one-shot `--json --once` pays all of that once; starting it on a thread of its own, while the
 * caller does other start-up work, takes it off the critical path. The warm-up holds
 * gpumem_nvml_lock from init to its last device, so that whatever comes next (gpumem_nvml_init,
 * a take of the kept samples) waits for it to finish.
 * With GPUMEM_WARM_KEEP the warm-up's samples are kept: a one-shot prints them (they are the first
 * sample, taken at kept_time_ms) instead of asking NVML a second time. Each is taken in two parts:
 * the quick part of every device first (identity, memory, the process lists), published at once
 * (gpumem_nvml_take_early) so that the caller reads /proc for those processes and builds its
 * document while the slow part (the calls whose first call is slow) runs. */
static gpumem_nvml_sample kept[GPUMEM_NVML_CACHE];
static int kept_count;               /* devices whose sample is kept; 0 none */
static char kept_taken[GPUMEM_NVML_CACHE];
static double kept_time_ms = -1;
static uint32_t warm_flags;
static int warm_started;

/* The quick parts, copied for the caller (the thread goes on writing `kept`). early_count: -2 not
 * published yet, -1 none (no keep, NVML failed), else the devices. Under early_lock. */
static gpumem_nvml_sample early[GPUMEM_NVML_CACHE];
static int early_count = -2;
static pthread_mutex_t early_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t early_cond = PTHREAD_COND_INITIALIZER;

static void forget_kept(void);

static void publish_early(int n) {
  pthread_mutex_lock(&early_lock);
  for (int i = 0; i < n; i++) memcpy(&early[i], &kept[i], sizeof early[i]);
  early_count = n;
  pthread_cond_broadcast(&early_cond);
  pthread_mutex_unlock(&early_lock);
}

static void *warm_up(void *arg) {
  (void)arg;
  char err[GPUMEM_NVML_ERROR];
  static gpumem_nvml_sample scratch;
  pthread_mutex_lock(&gpumem_nvml_lock);
  int published = 0;
  if (gpumem_nvml_init_locked(err, sizeof err) == 0) {
    int n = gpumem_nvml_device_count();
    int keep = (warm_flags & GPUMEM_WARM_KEEP) && n > 0 && n <= GPUMEM_NVML_CACHE;
    uint32_t flags = warm_flags & GPUMEM_SAMPLE_NO_PCIE;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now); /* when the sample began, as a caller's Date.now() before sampling */
    if (keep) {
      kept_time_ms = (double)now.tv_sec * 1e3 + (double)(now.tv_nsec / 1000000);
      for (int i = 0; i < n; i++) gpumem_nvml_sample_parts(i, &kept[i], flags, SAMPLE_QUICK);
      publish_early(n);
      published = 1;
      for (int i = 0; i < n; i++) gpumem_nvml_sample_parts(i, &kept[i], flags, SAMPLE_SLOW);
      kept_count = n;
    } else {
      for (int i = 0; i < n; i++) gpumem_nvml_sample_device(i, &scratch, flags);
    }
  }
  if (!published) publish_early(-1);
  pthread_mutex_unlock(&gpumem_nvml_lock);
  return NULL;
}

/* The published quick parts' count (-1: none, or no warm-up started), once the warm-up has
 * published. Takes early_lock; the caller releases it. */
static int lock_published(void) {
  pthread_mutex_lock(&early_lock);
  while (warm_started && early_count == -2) pthread_cond_wait(&early_cond, &early_lock);
  return warm_started && early_count > 0 ? early_count : -1;
}

int gpumem_nvml_take_early(int index, gpumem_nvml_sample *s) {
  int n = lock_published();
  int rc = index >= 0 && index < n ? 0 : -1;
  if (rc == 0) memcpy(s, &early[index], sizeof *s);
  pthread_mutex_unlock(&early_lock);
  return rc;
}

int gpumem_nvml_early_count(void) {
  int n = lock_published();
  pthread_mutex_unlock(&early_lock);
  return n;
}

int gpumem_nvml_init_async(uint32_t flags) {
  static int started;
  pthread_mutex_lock(&gpumem_nvml_lock);
  int first = !started;
  started = 1;
  warm_flags = first ? flags : warm_flags;
  gpumem_nvml_on_shutdown = forget_kept;
  pthread_mutex_unlock(&gpumem_nvml_lock);
  if (!first) return 0;
  pthread_t t;
  if (pthread_create(&t, NULL, warm_up, NULL) != 0) return -1;
  pthread_mutex_lock(&early_lock);
  warm_started = 1; /* before this call returns: the caller's takes then wait for the publication */
  pthread_mutex_unlock(&early_lock);
  pthread_detach(t);
  return 0;
}

int gpumem_nvml_take_kept(int index, gpumem_nvml_sample *s) {
  int rc = -1;
  pthread_mutex_lock(&gpumem_nvml_lock);
  if (index >= 0 && index < kept_count && !kept_taken[index]) {
    memcpy(s, &kept[index], sizeof *s);
    kept_taken[index] = 1;
    rc = 0;
  }
  pthread_mutex_unlock(&gpumem_nvml_lock);
  return rc;
}

double gpumem_nvml_kept_time_ms(void) { return kept_time_ms; }

static void forget_kept(void) {
  kept_count = 0;
  kept_time_ms = -1;
  pthread_mutex_lock(&early_lock);
  if (early_count != -2) early_count = -1;
  pthread_mutex_unlock(&early_lock);
}
