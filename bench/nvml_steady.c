/*
 * What each NVML call of a device's sample costs once the process is warm (a monitor's every tick, not
 * its first): each call 200 times in turn, 5 ms apart, after 5 untimed, its thread's CPU and the wall clock, medians
 * and the 90th percentile, in microseconds; then libgpumem's whole sample (cuda/nvml.c) the same way.
 * Where an idle monitor's second goes besides drawing (issue 38: NVML's sample was 1.8 ms of CPU).
 * rc: NVML's answer to the last call (3: not supported, 6: not found, no sample since the last).
 *   cc -O2 -Icuda bench/nvml_steady.c -o /tmp/nvml_steady -ldl -Lcuda/build -lgpumem -Wl,-rpath,$PWD/cuda/build && /tmp/nvml_steady [REPS]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml_lib.h" /* NVML's types as libgpumem declares them */

static void *lib;
static nvmlDevice_t dev;
static unsigned char buf[1 << 16] __attribute__((aligned(16)));
static unsigned long long util_seen; /* as libgpumem asks: the samples since the newest one seen */

static double clock_us(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define MAXREPS 2000
static int reps = 200;

static int call(const char *what) {
  unsigned u = 0, v = 0;
  if (!strcmp(what, "nvmlDeviceGetMemoryInfo_v2")) {
    unsigned *p = (unsigned *)buf;
    p[0] = (unsigned)(40 | (2 << 24)); /* nvmlMemory_v2: its size and version 2 */
    return ((fn_dev_ptr)dlsym(lib, what))(dev, buf);
  }
  if (!strcmp(what, "nvmlDeviceGetUtilizationRates")) return ((fn_dev_ptr)dlsym(lib, what))(dev, buf);
  if (!strcmp(what, "nvmlDeviceGetEncoderUtilization") || !strcmp(what, "nvmlDeviceGetDecoderUtilization")) return ((fn_dev_util)dlsym(lib, what))(dev, &u, &v);
  if (!strcmp(what, "nvmlDeviceGetTemperature")) return ((fn_dev_kind_uint)dlsym(lib, what))(dev, 0, &u);
  if (!strcmp(what, "nvmlDeviceGetClockInfo(SM)")) return ((fn_dev_kind_uint)dlsym(lib, "nvmlDeviceGetClockInfo"))(dev, 1, &u);
  if (!strcmp(what, "nvmlDeviceGetClockInfo(MEM)")) return ((fn_dev_kind_uint)dlsym(lib, "nvmlDeviceGetClockInfo"))(dev, 2, &u);
  if (!strcmp(what, "nvmlDeviceGetClockInfo(GRAPHICS)")) return ((fn_dev_kind_uint)dlsym(lib, "nvmlDeviceGetClockInfo"))(dev, 0, &u);
  if (!strcmp(what, "nvmlDeviceGetPowerUsage") || !strcmp(what, "nvmlDeviceGetEnforcedPowerLimit") || !strcmp(what, "nvmlDeviceGetFanSpeed")) return ((fn_dev_uint)dlsym(lib, what))(dev, &u);
  if (!strcmp(what, "nvmlDeviceGetPerformanceState")) return ((fn_dev_int)dlsym(lib, what))(dev, (int *)&u);
  if (!strcmp(what, "nvmlDeviceGetFieldValues(power instant)") || !strcmp(what, "nvmlDeviceGetFieldValues(power, PCIe rx, tx)")) {
    nvmlFieldValue_t *fv = (nvmlFieldValue_t *)buf;
    memset(fv, 0, 3 * sizeof *fv);
    fv[0].fieldId = NVML_FI_DEV_POWER_INSTANT;
    fv[1].fieldId = NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
    fv[2].fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
    return ((fn_dev_fields)dlsym(lib, "nvmlDeviceGetFieldValues"))(dev, strstr(what, "PCIe") ? 3 : 1, fv);
  }
  if (!strcmp(what, "nvmlDeviceGetComputeRunningProcesses_v3") || !strcmp(what, "nvmlDeviceGetGraphicsRunningProcesses_v3")) {
    u = 64;
    return ((fn_dev_procs)dlsym(lib, what))(dev, &u, buf);
  }
  if (!strcmp(what, "nvmlDeviceGetProcessUtilization")) {
    nvmlProcessUtilizationSample_t *ps = (nvmlProcessUtilizationSample_t *)buf;
    u = sizeof buf / sizeof *ps;
    int rc = ((fn_dev_proc_util)dlsym(lib, what))(dev, ps, &u, util_seen);
    if (rc == 0)
      for (unsigned k = 0; k < u; k++)
        if (ps[k].timeStamp > util_seen) util_seen = ps[k].timeStamp;
    return rc;
  }
  return -1;
}

static void report(const char *what, int rc, double *cpu, double *wall) {
  qsort(cpu, reps, sizeof *cpu, cmp);
  qsort(wall, reps, sizeof *wall, cmp);
  printf("| %s | %.1f | %.1f | %.1f | %.1f | %d |\n", what, cpu[reps / 2], cpu[reps * 9 / 10], wall[reps / 2], wall[reps * 9 / 10], rc);
}

int main(int argc, char **argv) {
  if (argc > 1) reps = atoi(argv[1]);
  if (reps < 10 || reps > MAXREPS) reps = 200;
  lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) return fprintf(stderr, "nvml_steady: %s\n", dlerror()), 1;
  if (((fn_void)dlsym(lib, "nvmlInit_v2"))() != 0) return fprintf(stderr, "nvml_steady: nvmlInit_v2 failed\n"), 1;
  if (((fn_handle)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))(0, &dev) != 0) return fprintf(stderr, "nvml_steady: no device 0\n"), 1;
  static const char *calls[] = {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3",
                                "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization", "nvmlDeviceGetEncoderUtilization",
                                "nvmlDeviceGetDecoderUtilization", "nvmlDeviceGetTemperature", "nvmlDeviceGetEnforcedPowerLimit",
                                "nvmlDeviceGetFanSpeed", "nvmlDeviceGetClockInfo(SM)", "nvmlDeviceGetClockInfo(MEM)",
                                "nvmlDeviceGetClockInfo(GRAPHICS)", "nvmlDeviceGetPerformanceState", "nvmlDeviceGetPowerUsage",
                                "nvmlDeviceGetFieldValues(power instant)", "nvmlDeviceGetFieldValues(power, PCIe rx, tx)"};
  static double cpu[MAXREPS], wall[MAXREPS];
  printf("%d calls of each, 5 ms apart, after 5 untimed (µs)\n\n| call | CPU median | CPU p90 | wall median | wall p90 | rc |\n| --- | --- | --- | --- | --- | --- |\n", reps);
  for (size_t k = 0; k < sizeof calls / sizeof *calls; k++) {
    int rc = 0;
    for (int i = 0; i < 5; i++) rc = call(calls[k]);
    for (int i = 0; i < reps; i++) {
      struct timespec gap = {0, 5 * 1000 * 1000}; /* 5 ms apart: not what the driver kept a moment ago */
      nanosleep(&gap, NULL);
      double c0 = clock_us(CLOCK_THREAD_CPUTIME_ID), w0 = clock_us(CLOCK_MONOTONIC);
      rc = call(calls[k]);
      cpu[i] = clock_us(CLOCK_THREAD_CPUTIME_ID) - c0;
      wall[i] = clock_us(CLOCK_MONOTONIC) - w0;
    }
    report(calls[k], rc, cpu, wall);
  }
  char err[256];
  if (gpumem_nvml_init(err, sizeof err) != 0) return fprintf(stderr, "nvml_steady: %s\n", err), 1;
  static gpumem_nvml_sample s;
  for (int i = 0; i < 5; i++) gpumem_nvml_sample_device(0, &s, GPUMEM_SAMPLE_NO_PCIE);
  for (int i = 0; i < reps; i++) {
    double c0 = clock_us(CLOCK_THREAD_CPUTIME_ID), w0 = clock_us(CLOCK_MONOTONIC);
    gpumem_nvml_sample_device(0, &s, GPUMEM_SAMPLE_NO_PCIE);
    cpu[i] = clock_us(CLOCK_THREAD_CPUTIME_ID) - c0;
    wall[i] = clock_us(CLOCK_MONOTONIC) - w0;
  }
  report("libgpumem's whole sample (gpumem_nvml_sample_device)", 0, cpu, wall);
  /* The same at a monitor's pace (a call back to back may find what the driver keeps for a moment). */
  const int paced = reps < 40 ? reps : 40;
  for (int i = 0; i < paced; i++) {
    struct timespec gap = {0, 100 * 1000 * 1000};
    nanosleep(&gap, NULL);
    double c0 = clock_us(CLOCK_THREAD_CPUTIME_ID), w0 = clock_us(CLOCK_MONOTONIC);
    gpumem_nvml_sample_device(0, &s, GPUMEM_SAMPLE_NO_PCIE);
    cpu[i] = clock_us(CLOCK_THREAD_CPUTIME_ID) - c0;
    wall[i] = clock_us(CLOCK_MONOTONIC) - w0;
  }
  reps = paced;
  report("the whole sample, one every 100 ms", 0, cpu, wall);
  return 0;
}
