/*
 * nvml_constants.c — a device's constants kept across runs (see nvml_constants.h for why).
 *
 * One text file per device, named by its UUID, in a directory of the user's own (0700):
 *   gpumem-nvml-constants 1
 *   boot <the kernel's boot id>  driver <the driver version>
 *   sm_clock_max_mhz <n> memory_clock_max_mhz <n> unsupported <n>
 * A file from another boot or driver, or one that does not parse, is ignored and rewritten.
 */
#define _GNU_SOURCE
#include "nvml_constants.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "gpumem-nvml-constants 1"

static void boot_id(char *out, int len) {
  out[0] = 0;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return;
  if (fgets(out, len, f)) out[strcspn(out, "\n")] = 0;
  fclose(f);
}

/* The file of `uuid` in `dir`; 0 when the UUID is not a plain name (it names the file). */
static int file_of(const char *dir, const char *uuid, char *out, int len) {
  if (!dir[0] || !uuid[0]) return 0;
  for (const char *p = uuid; *p; p++) {
    if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') || *p == '-')) return 0;
  }
  return snprintf(out, len, "%s/%s", dir, uuid) < len;
}

void gpumem_nvml_constants_dir(char *out, int len) {
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (xdg && xdg[0] == '/') snprintf(out, len, "%s/gpumem-tui/nvml", xdg);
  else if (home && home[0] == '/') snprintf(out, len, "%s/.cache/gpumem-tui/nvml", home);
  else out[0] = 0;
}

int gpumem_nvml_constants_load(const char *dir, const char *uuid, const char *driver, gpumem_nvml_constants *c) {
  char path[512], boot[64], want[64], line[160], drv[96];
  if (!file_of(dir, uuid, path, sizeof path)) return 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  gpumem_nvml_constants got;
  boot_id(want, sizeof want);
  int ok = fgets(line, sizeof line, f) && strcmp(line, MAGIC "\n") == 0 &&
           fscanf(f, " boot %63s driver %95s", boot, drv) == 2 &&
           fscanf(f, " sm_clock_max_mhz %" SCNd64 " memory_clock_max_mhz %" SCNd64 " unsupported %" SCNu32, &got.sm_clock_max_mhz,
                  &got.memory_clock_max_mhz, &got.unsupported) == 3;
  fclose(f);
  if (!ok || !want[0] || strcmp(boot, want) != 0 || strcmp(drv, driver) != 0) return 0;
  *c = got;
  return 1;
}

/* mkdir -p, each level 0700. */
static int make_dirs(const char *dir) {
  char p[512];
  if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return -1;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
    *s = '/';
  }
  return mkdir(p, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

int gpumem_nvml_constants_store(const char *dir, const char *uuid, const char *driver, const gpumem_nvml_constants *c) {
  char path[512], tmp[600], boot[64];
  boot_id(boot, sizeof boot);
  if (!boot[0] || !driver[0] || strpbrk(driver, " \t\n") || !file_of(dir, uuid, path, sizeof path)) return -1;
  if (make_dirs(dir) != 0) return -1;
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  int ok = fprintf(f, MAGIC "\nboot %s driver %s\nsm_clock_max_mhz %" PRId64 " memory_clock_max_mhz %" PRId64 " unsupported %" PRIu32 "\n",
                   boot, driver, c->sm_clock_max_mhz, c->memory_clock_max_mhz, c->unsupported) > 0;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}
