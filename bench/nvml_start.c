/*
 * NVML's part of a one-shot, call by call, in a fresh process: where the ~25 ms that
 * `gpumem-tui --json --once` waits for on a GSP-based GPU go (bench/start-nvml.ts runs it).
 *   cc -O2 -Icuda bench/nvml_start.c -o /tmp/nvml_start -ldl -lpthread
 *   /tmp/nvml_start calls      each step's time in µs: dlopen, nvmlInit, then the calls libgpumem's
 *                              one-shot makes of device 0 (cuda/nvml.c: the quick part, then the
 *                              slow part), each a first call in this process
 *   /tmp/nvml_start serial     the slow part's time, its calls one after another (as libgpumem makes them,
 *                              the maximum clocks kept from an earlier run, as is a fan that is not there)
 *   /tmp/nvml_start overlap    the same calls, the utilization queries (the slowest first calls on an
 *                              H100: 3.7 ms) on a second thread while this one makes the rest: whether
 *                              the driver answers two of a device's calls at once
 * Prints "name µs" lines; exit status 1 where NVML cannot start.
 */
#define _GNU_SOURCE
#include "nvml_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void *lib;
static nvmlDevice_t dev;
static int calls_mode;
static double mark;

/* Prints the time since the last step where each call is timed (calls mode). */
static void step(const char *name, nvmlReturn_t r) {
  if (!calls_mode) return;
  double t = now_us();
  printf("%s %.1f %d\n", name, t - mark, r);
  mark = now_us();
}

/* A symbol the one-shot calls; a driver without it ends the run, said in words. */
static void *need(const char *name) {
  void *f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "nvml_start: libnvidia-ml.so.1 has no %s\n", name);
    exit(1);
  }
  return f;
}
#define F(type, name) ((type)need(name))

static void utilization_calls(void) {
  nvmlUtilization_t u;
  step("nvmlDeviceGetUtilizationRates", F(fn_dev_ptr, "nvmlDeviceGetUtilizationRates")(dev, &u));
  static nvmlProcessUtilizationSample_t buf[256];
  unsigned int n = 256;
  step("nvmlDeviceGetProcessUtilization", F(fn_dev_proc_util, "nvmlDeviceGetProcessUtilization")(dev, buf, &n, 0));
}

static void *utilization_thread(void *arg) {
  (void)arg;
  utilization_calls();
  return NULL;
}

static void other_slow_calls(void) {
  unsigned int v = 0, p = 0;
  int ps = 0;
  fn_dev_kind_uint max_clock = F(fn_dev_kind_uint, "nvmlDeviceGetMaxClockInfo"), clock = F(fn_dev_kind_uint, "nvmlDeviceGetClockInfo");
  if (calls_mode) { /* libgpumem reads these once a driver (nvml_constants.c): a one-shot has them kept */
    step("nvmlDeviceGetMaxClockInfo(SM) (kept after a first run)", max_clock(dev, NVML_CLOCK_SM, &v));
    step("nvmlDeviceGetMaxClockInfo(MEM) (kept after a first run)", max_clock(dev, NVML_CLOCK_MEM, &v));
  }
  step("nvmlDeviceGetEncoderUtilization", F(fn_dev_util, "nvmlDeviceGetEncoderUtilization")(dev, &v, &p));
  step("nvmlDeviceGetDecoderUtilization", F(fn_dev_util, "nvmlDeviceGetDecoderUtilization")(dev, &v, &p));
  step("nvmlDeviceGetTemperature", F(fn_dev_kind_uint, "nvmlDeviceGetTemperature")(dev, 0, &v));
  step("nvmlDeviceGetEnforcedPowerLimit", F(fn_dev_uint, "nvmlDeviceGetEnforcedPowerLimit")(dev, &v));
  if (calls_mode) step("nvmlDeviceGetFanSpeed (skipped after a first run where not supported)", F(fn_dev_uint, "nvmlDeviceGetFanSpeed")(dev, &v));
  step("nvmlDeviceGetClockInfo(SM)", clock(dev, NVML_CLOCK_SM, &v));
  step("nvmlDeviceGetClockInfo(MEM)", clock(dev, NVML_CLOCK_MEM, &v));
  step("nvmlDeviceGetClockInfo(GRAPHICS)", clock(dev, NVML_CLOCK_GRAPHICS, &v));
  step("nvmlDeviceGetPerformanceState", F(fn_dev_int, "nvmlDeviceGetPerformanceState")(dev, &ps));
  nvmlFieldValue_t fv[1];
  memset(fv, 0, sizeof fv);
  fv[0].fieldId = NVML_FI_DEV_POWER_INSTANT;
  step("nvmlDeviceGetFieldValues(power instant)", F(fn_dev_fields, "nvmlDeviceGetFieldValues")(dev, 1, fv));
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "calls";
  calls_mode = strcmp(mode, "calls") == 0;
  if (!calls_mode && strcmp(mode, "serial") != 0 && strcmp(mode, "overlap") != 0) {
    fprintf(stderr, "usage: nvml_start calls|serial|overlap\n");
    return 2;
  }
  mark = now_us();
  lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  step("dlopen(libnvidia-ml.so.1)", lib ? 0 : -1);
  if (!lib) {
    fprintf(stderr, "nvml_start: no libnvidia-ml.so.1\n");
    return 1;
  }
  nvmlReturn_t r = F(fn_void, "nvmlInit_v2")();
  step("nvmlInit_v2", r);
  if (r != NVML_SUCCESS) {
    fprintf(stderr, "nvml_start: nvmlInit_v2: %d\n", r);
    return 1;
  }
  char text[96];
  unsigned int n = 0;
  step("nvmlDeviceGetCount_v2", F(fn_uint_ptr, "nvmlDeviceGetCount_v2")(&n));
  step("nvmlDeviceGetHandleByIndex_v2", F(fn_handle, "nvmlDeviceGetHandleByIndex_v2")(0, &dev));
  step("nvmlDeviceGetName", F(fn_dev_text, "nvmlDeviceGetName")(dev, text, sizeof text));
  step("nvmlDeviceGetUUID", F(fn_dev_text, "nvmlDeviceGetUUID")(dev, text, sizeof text));
  nvmlPciInfo_t pci;
  step("nvmlDeviceGetPciInfo_v3", F(fn_dev_ptr, "nvmlDeviceGetPciInfo_v3")(dev, &pci));
  nvmlMemory_v2_t m2;
  memset(&m2, 0, sizeof m2);
  m2.version = NVML_STRUCT_VERSION(sizeof m2, 2);
  step("nvmlDeviceGetMemoryInfo_v2", F(fn_dev_ptr, "nvmlDeviceGetMemoryInfo_v2")(dev, &m2));
  static nvmlProcessInfo_v2_t procs[64];
  unsigned int np = 64;
  step("nvmlDeviceGetComputeRunningProcesses_v3", F(fn_dev_procs, "nvmlDeviceGetComputeRunningProcesses_v3")(dev, &np, procs));
  np = 64;
  step("nvmlDeviceGetGraphicsRunningProcesses_v3", F(fn_dev_procs, "nvmlDeviceGetGraphicsRunningProcesses_v3")(dev, &np, procs));
  double t0 = now_us();
  if (strcmp(mode, "overlap") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, utilization_thread, NULL) != 0) return 1;
    other_slow_calls();
    pthread_join(t, NULL);
  } else {
    utilization_calls();
    other_slow_calls();
  }
  if (!calls_mode) printf("slow part %.1f\n", now_us() - t0);
  return 0;
}
