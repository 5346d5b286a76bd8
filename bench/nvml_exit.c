/*
 * What a process that used NVML pays to end: the same short NVML session (init, a device's handle,
 * memory and utilization) ended three ways, each a fresh process timed by its parent from fork to
 * the end of waitpid, interleaved.
 *   cc -O2 bench/nvml_exit.c -o /tmp/nvml_exit -ldl && /tmp/nvml_exit run 20
 * Modes: exit (return from main: atexit handlers and the libraries' destructors run), _exit (none
 * of them), shutdown (nvmlShutdown, then exit).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int (*fn)();

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int session(const char *mode) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) return 3;
  if (((fn)dlsym(lib, "nvmlInit_v2"))() != 0) return 4;
  void *d = NULL;
  static unsigned char buf[4096];
  ((fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))(0, &d);
  *(unsigned *)buf = 40 | (2u << 24);
  ((fn)dlsym(lib, "nvmlDeviceGetMemoryInfo_v2"))(d, buf);
  ((fn)dlsym(lib, "nvmlDeviceGetUtilizationRates"))(d, buf);
  if (!strcmp(mode, "_exit")) _exit(0);
  if (!strcmp(mode, "shutdown")) ((fn)dlsym(lib, "nvmlShutdown"))();
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: nvml_exit run N | exit | _exit | shutdown\n");
    return 2;
  }
  if (strcmp(argv[1], "run") != 0) return session(argv[1]);
  const int n = argc > 2 ? atoi(argv[2]) : 20;
  const char *modes[] = {"exit", "_exit", "shutdown"};
  double *t = calloc((size_t)n * 3, sizeof *t);
  for (int i = 0; i < n; i++) {
    for (int m = 0; m < 3; m++) {
      const double t0 = now_ms();
      pid_t p = fork();
      if (p == 0) {
        execl("/proc/self/exe", argv[0], modes[m], (char *)NULL);
        _exit(127);
      }
      int st = 0;
      waitpid(p, &st, 0);
      t[m * n + i] = now_ms() - t0;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fprintf(stderr, "%s: status %d\n", modes[m], st);
    }
  }
  for (int m = 0; m < 3; m++) {
    qsort(t + m * n, (size_t)n, sizeof *t, cmp);
    printf("%-9s median %6.2f ms  min %6.2f  max %6.2f  (%d runs, fork to waitpid)\n", modes[m], t[m * n + n / 2], t[m * n], t[m * n + n - 1], n);
  }
  return 0;
}
