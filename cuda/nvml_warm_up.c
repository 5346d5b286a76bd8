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
 * sample, taken at kept_time_ms) instead of asking NVML a second time. */
static gpumem_nvml_sample kept[GPUMEM_NVML_CACHE];
static int kept_count;               /* devices whose sample is kept; 0 none */
static char kept_taken[GPUMEM_NVML_CACHE];
static double kept_time_ms = -1;
static uint32_t warm_flags;

static void *warm_up(void *arg) {
  (void)arg;
  char err[GPUMEM_NVML_ERROR];
  static gpumem_nvml_sample scratch;
  pthread_mutex_lock(&gpumem_nvml_lock);
  if (gpumem_nvml_init_locked(err, sizeof err) == 0) {
    int n = gpumem_nvml_device_count();
    int keep = (warm_flags & GPUMEM_WARM_KEEP) && n > 0 && n <= GPUMEM_NVML_CACHE;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now); /* when the sample began, as a caller's Date.now() before sampling */
    for (int i = 0; i < n; i++) gpumem_nvml_sample_device(i, keep ? &kept[i] : &scratch, warm_flags & GPUMEM_SAMPLE_NO_PCIE);
    if (keep) {
      kept_count = n;
      kept_time_ms = (double)now.tv_sec * 1e3 + (double)(now.tv_nsec / 1000000);
    }
  }
  pthread_mutex_unlock(&gpumem_nvml_lock);
  return NULL;
}

int gpumem_nvml_init_async(uint32_t flags) {
  static int started;
  pthread_mutex_lock(&gpumem_nvml_lock);
  int first = !started;
  started = 1;
  warm_flags = first ? flags : warm_flags;
  pthread_mutex_unlock(&gpumem_nvml_lock);
  if (!first) return 0;
  pthread_t t;
  if (pthread_create(&t, NULL, warm_up, NULL) != 0) return -1;
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

void gpumem_nvml_forget_kept(void) {
  kept_count = 0;
  kept_time_ms = -1;
}
