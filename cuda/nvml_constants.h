/*
 * nvml_constants.h — what never changes while a driver is loaded, kept from one run to the next.
 *
 * A device's maximum clocks cost ~1.3 ms a call on an H100 (~4.4 ms the first time in a process)
 * and a refused call ("not supported": the fan of a passively cooled GPU) ~0.7 ms the first time:
 * a fifth of what a one-shot `--json --once` spends in NVML. Both are fixed for a device under one
 * driver, so they are kept in a small file per device, valid for that driver and that boot only.
 */
#ifndef GPUMEM_NVML_CONSTANTS_H
#define GPUMEM_NVML_CONSTANTS_H

#include <stdint.h>

typedef struct gpumem_nvml_constants {
  int64_t sm_clock_max_mhz;     /* -1: not available */
  int64_t memory_clock_max_mhz; /* -1: not available */
  uint32_t unsupported;         /* the calls the device refused, nvml.c's CALL_* bits */
} gpumem_nvml_constants;

/* Where the files go: $XDG_CACHE_HOME/gpumem-tui/nvml, else ~/.cache/gpumem-tui/nvml; "" if
 * neither is set (nothing is kept then). Written into `out` (size `len`). */
void gpumem_nvml_constants_dir(char *out, int len);

/* 1 and `c` filled when `dir` holds this device's constants for this driver and this boot; else 0
 * (no file, another driver or boot, a file that does not parse). */
int gpumem_nvml_constants_load(const char *dir, const char *uuid, const char *driver, gpumem_nvml_constants *c);

/* Keep `c` for this device, driver and boot (written whole, then renamed into place). 0 or -1. */
int gpumem_nvml_constants_store(const char *dir, const char *uuid, const char *driver, const gpumem_nvml_constants *c);

#endif /* GPUMEM_NVML_CONSTANTS_H */
