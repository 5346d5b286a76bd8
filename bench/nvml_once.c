/*
 * The one-shot's NVML work without Bun: libgpumem's own sampling (cuda/nvml.c), the same calls
 * `gpumem-tui --json --once` makes for each device (identity, memory, processes, utilization,
 * temperature, power, fan, clocks and maximum clocks, performance state; no PCIe counters), from
 * C, then every figure printed. bench/start-floor.ts times it as the floor a Bun program stands on.
 *   cc -O2 -Icuda bench/nvml_once.c -o /tmp/nvml_once -Lcuda/build -lgpumem -Wl,-rpath,$PWD/cuda/build
 */
#include <stdio.h>

#include "nvml.h"

int main(void) {
  char err[256];
  if (gpumem_nvml_init(err, sizeof err) != 0) {
    fprintf(stderr, "nvml_once: %s\n", err);
    return 1;
  }
  const int n = gpumem_nvml_device_count();
  static gpumem_nvml_sample s;
  for (int i = 0; i < n; i++) {
    if (gpumem_nvml_sample_device(i, &s, GPUMEM_SAMPLE_NO_PCIE) != 0) {
      fprintf(stderr, "nvml_once: device %d: %s\n", i, s.error);
      return 1;
    }
    printf("%d %s %s", i, s.name, s.uuid);
    for (int f = 0; f < GPUMEM_NVML_NFIELDS; f++) printf(" %lld", (long long)s.fields[f]);
    printf("\n");
  }
  return 0;
}
