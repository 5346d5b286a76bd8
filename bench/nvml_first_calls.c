/*
 * Whether NVML's slow first calls overlap when made from several threads: what a one-shot
 * `--json --once` pays after nvmlInit (utilization, power, temperature, fan, clocks, max clocks,
 * field values: 0.4 to 3.7 ms each the first time on an H100, bench/results/nvml_calls.txt).
 *   cc -O2 bench/nvml_first_calls.c -o /tmp/nvml_first_calls -ldl -lpthread
 *   /tmp/nvml_first_calls serial|parallel|noattach   (one process per measurement: first calls are per process)
 * noattach: serial, after nvmlInitWithFlags(NVML_INIT_FLAG_NO_ATTACH) in place of nvmlInit_v2: whether
 * a start that does not attach the GPUs at init is shorter in all, and the calls still answer.
 * Prints one line: mode, init ms, first calls ms, whole process ms so far (noattach: and the return
 * codes of the handle and utilization calls; 0 is success).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef int (*fn)();
static void *lib;
static void *dev;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One slow first call each: what nvml.c's sample makes of a device. */
static void *call(void *arg) {
  unsigned u = 0, v = 0;
  unsigned char buf[256];
  memset(buf, 0, sizeof buf);
  switch ((int)(long)arg) {
  case 0: ((fn)dlsym(lib, "nvmlDeviceGetUtilizationRates"))(dev, buf); break;
  case 1: ((fn)dlsym(lib, "nvmlDeviceGetPowerUsage"))(dev, &u); break;
  case 2: ((fn)dlsym(lib, "nvmlDeviceGetTemperature"))(dev, 0, &u); break;
  case 3: ((fn)dlsym(lib, "nvmlDeviceGetFanSpeed"))(dev, &u); break;
  case 4: ((fn)dlsym(lib, "nvmlDeviceGetClockInfo"))(dev, 1, &u); break;
  case 5: ((fn)dlsym(lib, "nvmlDeviceGetMaxClockInfo"))(dev, 1, &u); break;
  case 6: ((fn)dlsym(lib, "nvmlDeviceGetMaxClockInfo"))(dev, 2, &u); break;
  case 7: *(unsigned *)buf = 186; ((fn)dlsym(lib, "nvmlDeviceGetFieldValues"))(dev, 1, buf); break;
  case 8: ((fn)dlsym(lib, "nvmlDeviceGetEncoderUtilization"))(dev, &u, &v); break;
  }
  return NULL;
}
enum { CALLS = 9 };

int main(int argc, char **argv) {
  double t0 = now_ms();
  int parallel = argc > 1 && strcmp(argv[1], "parallel") == 0;
  int noattach = argc > 1 && strcmp(argv[1], "noattach") == 0;
  lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) {
    puts("no NVIDIA driver");
    return 1;
  }
  if (noattach) ((fn)dlsym(lib, "nvmlInitWithFlags"))(2u); /* NVML_INIT_FLAG_NO_ATTACH */
  else ((fn)dlsym(lib, "nvmlInit_v2"))();
  double t1 = now_ms();
  int handle_rc = ((fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))(0, &dev);
  unsigned char util[8];
  int util_rc = noattach ? ((fn)dlsym(lib, "nvmlDeviceGetUtilizationRates"))(dev, util) : 0;
  if (parallel) {
    pthread_t t[CALLS];
    for (long i = 0; i < CALLS; i++) pthread_create(&t[i], NULL, call, (void *)i);
    for (int i = 0; i < CALLS; i++) pthread_join(t[i], NULL);
  } else {
    for (long i = 0; i < CALLS; i++) call((void *)i);
  }
  double t2 = now_ms();
  printf("%s init %.2f first_calls %.2f total %.2f", parallel ? "parallel" : noattach ? "noattach" : "serial", t1 - t0, t2 - t1, t2 - t0);
  if (noattach) printf(" handle_rc %d utilization_rc %d", handle_rc, util_rc);
  printf("\n");
  return 0;
}
