/*
 * Which NVML calls cost what: times each call libgpumem makes for a device sample, on its own.
 *   cc -O2 -I cuda bench/nvml_calls.c -o /tmp/nvml_calls -ldl && /tmp/nvml_calls [REPS]
 * Prints one line per call: median microseconds over REPS calls, and the first call's time
 * (what a one-shot `--json --once` pays).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*fn)();
static void *lib;
static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double times[100000];
static int reps = 200;
static unsigned char buf[65536];

#define TIME(label, call)                                                                          \
  do {                                                                                             \
    int rc = 0;                                                                                    \
    double first = 0;                                                                              \
    for (int i = 0; i < reps; i++) {                                                               \
      double t0 = now_us();                                                                        \
      rc = (call);                                                                                 \
      times[i] = now_us() - t0;                                                                    \
      if (i == 0) first = times[0];                                                                \
    }                                                                                              \
    qsort(times, reps, sizeof(double), cmp);                                                       \
    printf("%-52s %9.1f us median, %9.1f us first call (rc %d)\n", label, times[reps / 2], first, rc); \
  } while (0)

int main(int argc, char **argv) {
  if (argc > 1) reps = atoi(argv[1]);
  lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) {
    puts("no NVIDIA driver");
    return 1;
  }
  double t0 = now_us();
  ((fn)dlsym(lib, "nvmlInit_v2"))();
  printf("%-48s %9.1f us\n", "nvmlInit_v2 (once)", now_us() - t0);
  void *d = NULL;
  ((fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))(0, &d);
  unsigned u = 0, v = 0;
  int k = 0;
  TIME("nvmlDeviceGetHandleByIndex_v2", ((fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))(0, &d));
  TIME("nvmlDeviceGetName", ((fn)dlsym(lib, "nvmlDeviceGetName"))(d, buf, 96));
  TIME("nvmlDeviceGetUUID", ((fn)dlsym(lib, "nvmlDeviceGetUUID"))(d, buf, 96));
  TIME("nvmlDeviceGetPciInfo_v3", ((fn)dlsym(lib, "nvmlDeviceGetPciInfo_v3"))(d, buf));
  memset(buf, 0, 64);
  *(unsigned *)buf = 40 | (2u << 24);
  TIME("nvmlDeviceGetMemoryInfo_v2", (*(unsigned *)buf = 40 | (2u << 24), ((fn)dlsym(lib, "nvmlDeviceGetMemoryInfo_v2"))(d, buf)));
  TIME("nvmlDeviceGetUtilizationRates", ((fn)dlsym(lib, "nvmlDeviceGetUtilizationRates"))(d, buf));
  TIME("nvmlDeviceGetEncoderUtilization", ((fn)dlsym(lib, "nvmlDeviceGetEncoderUtilization"))(d, &u, &v));
  TIME("nvmlDeviceGetDecoderUtilization", ((fn)dlsym(lib, "nvmlDeviceGetDecoderUtilization"))(d, &u, &v));
  TIME("nvmlDeviceGetTemperature", ((fn)dlsym(lib, "nvmlDeviceGetTemperature"))(d, 0, &u));
  TIME("nvmlDeviceGetPowerUsage", ((fn)dlsym(lib, "nvmlDeviceGetPowerUsage"))(d, &u));
  TIME("nvmlDeviceGetEnforcedPowerLimit", ((fn)dlsym(lib, "nvmlDeviceGetEnforcedPowerLimit"))(d, &u));
  TIME("nvmlDeviceGetFanSpeed", ((fn)dlsym(lib, "nvmlDeviceGetFanSpeed"))(d, &u));
  TIME("nvmlDeviceGetClockInfo(SM)", ((fn)dlsym(lib, "nvmlDeviceGetClockInfo"))(d, 1, &u));
  TIME("nvmlDeviceGetMaxClockInfo(SM)", ((fn)dlsym(lib, "nvmlDeviceGetMaxClockInfo"))(d, 1, &u));
  TIME("nvmlDeviceGetClockInfo(MEM)", ((fn)dlsym(lib, "nvmlDeviceGetClockInfo"))(d, 2, &u));
  TIME("nvmlDeviceGetMaxClockInfo(MEM)", ((fn)dlsym(lib, "nvmlDeviceGetMaxClockInfo"))(d, 2, &u));
  TIME("nvmlDeviceGetClockInfo(GRAPHICS)", ((fn)dlsym(lib, "nvmlDeviceGetClockInfo"))(d, 0, &u));
  TIME("nvmlDeviceGetPerformanceState", ((fn)dlsym(lib, "nvmlDeviceGetPerformanceState"))(d, &k));
  unsigned ids[3] = {186, 198, 197};
  static unsigned char fv[3 * 40];
  TIME("nvmlDeviceGetFieldValues(power instant, pcie rx/tx)",
       (memset(fv, 0, sizeof fv), *(unsigned *)(fv) = ids[0], *(unsigned *)(fv + 40) = ids[1], *(unsigned *)(fv + 80) = ids[2],
        ((fn)dlsym(lib, "nvmlDeviceGetFieldValues"))(d, 3, fv)));
  TIME("nvmlDeviceGetFieldValues(power instant)",
       (memset(fv, 0, sizeof fv), *(unsigned *)(fv) = ids[0], ((fn)dlsym(lib, "nvmlDeviceGetFieldValues"))(d, 1, fv)));
  TIME("nvmlDeviceGetFieldValues(pcie rx/tx)",
       (memset(fv, 0, sizeof fv), *(unsigned *)(fv) = ids[1], *(unsigned *)(fv + 40) = ids[2],
        ((fn)dlsym(lib, "nvmlDeviceGetFieldValues"))(d, 2, fv)));
  TIME("nvmlDeviceGetComputeRunningProcesses_v3", (u = 64, ((fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"))(d, &u, buf)));
  TIME("nvmlDeviceGetGraphicsRunningProcesses_v3", (u = 64, ((fn)dlsym(lib, "nvmlDeviceGetGraphicsRunningProcesses_v3"))(d, &u, buf)));
  return 0;
}
