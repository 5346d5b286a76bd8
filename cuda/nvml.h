/*
 * nvml.h — libgpumem's NVML surface: one call fills one sample of one device.
 *
 * NVML is loaded with dlopen at run time and declared by us (no nvml.h, no CUDA toolkit needed to
 * build), so the library builds and loads on machines with no NVIDIA driver and says so.
 */
#ifndef GPUMEM_NVML_H
#define GPUMEM_NVML_H

#include <stdint.h>

#define GPUMEM_NVML_TEXT 96
#define GPUMEM_NVML_ERROR 160
#define GPUMEM_NVML_MAX_PROCESSES 64

/* The numeric fields of a device sample, in order. -1 means "not available" (the device or driver
 * does not report it), never 0. PCIe traffic comes as NVML's cumulative byte counters with their
 * timestamp (a rate needs two samples; nvmlDeviceGetPcieThroughput would block 20 ms a direction). The TypeScript side reads the names from
 * gpumem_nvml_field_names() so that this list is the only definition of the order. */
#define GPUMEM_NVML_FIELDS(X)                                                                     \
  X(memory_total_bytes)                                                                          \
  X(memory_used_bytes)                                                                           \
  X(memory_free_bytes)                                                                           \
  X(memory_reserved_bytes)                                                                       \
  X(gpu_utilization_percent)                                                                     \
  X(memory_utilization_percent)                                                                  \
  X(encoder_utilization_percent)                                                                 \
  X(decoder_utilization_percent)                                                                 \
  X(temperature_celsius)                                                                         \
  X(power_draw_milliwatts)                                                                       \
  X(power_limit_milliwatts)                                                                      \
  X(fan_speed_percent)                                                                           \
  X(sm_clock_mhz)                                                                                \
  X(sm_clock_max_mhz)                                                                            \
  X(memory_clock_mhz)                                                                            \
  X(memory_clock_max_mhz)                                                                        \
  X(graphics_clock_mhz)                                                                          \
  X(pcie_rx_bytes_counter)                                                                       \
  X(pcie_tx_bytes_counter)                                                                       \
  X(pcie_counter_time_us)                                                                        \
  X(performance_state)                                                                           \
  X(process_count)

#define GPUMEM_NVML_ENUM(name) GPUMEM_NVML_F_##name,
enum { GPUMEM_NVML_FIELDS(GPUMEM_NVML_ENUM) GPUMEM_NVML_NFIELDS };
#undef GPUMEM_NVML_ENUM

/* Process kinds, as a bit set: a process can hold both a compute and a graphics context. */
enum { GPUMEM_PROCESS_COMPUTE = 1, GPUMEM_PROCESS_GRAPHICS = 2 };

typedef struct gpumem_nvml_process {
  uint32_t pid;        /* as NVML sees it: the host's pid namespace */
  uint32_t kind;       /* GPUMEM_PROCESS_* bits */
  int64_t used_bytes;  /* -1: not available (e.g. no permission, WDDM) */
  int32_t sm_percent;  /* its share of SM time over the last sample period; -1: not available
                          (not supported, or NVML had no utilization sample of it since the last) */
  int32_t reserved_;   /* keeps the record a multiple of 8 bytes */
} gpumem_nvml_process;

typedef struct gpumem_nvml_sample {
  char name[GPUMEM_NVML_TEXT];
  char uuid[GPUMEM_NVML_TEXT];
  char pci_bus_id[GPUMEM_NVML_TEXT];
  char error[GPUMEM_NVML_ERROR]; /* first unexpected NVML error of this sample, NVML's own words */
  int64_t fields[GPUMEM_NVML_NFIELDS];
  uint32_t n_processes;           /* entries filled below */
  uint32_t process_api;           /* 3, 2 or 1: which process-list API answered; 0 none */
  gpumem_nvml_process processes[GPUMEM_NVML_MAX_PROCESSES];
} gpumem_nvml_sample;

/* 0 on success; otherwise a negative code and `err` holds why, in NVML's words where NVML spoke:
 *  -1 libnvidia-ml.so.1 could not be loaded (no driver), -2 nvmlInit failed. Idempotent. */
int gpumem_nvml_init(char *err, int errlen);
/* Start nvmlInit and a first sample of every device on a thread of its own; a later
 * gpumem_nvml_init waits for it. For start-up paths that have other work to do meanwhile.
 * `flags`: GPUMEM_SAMPLE_* for that sample, and GPUMEM_WARM_KEEP to keep it for
 * gpumem_nvml_take_kept (a one-shot); without, it is thrown away (its calls were the slow part).
 * Only the first call starts anything. 0, or -1 where no thread could be started. */
enum { GPUMEM_WARM_KEEP = 1u << 8 };
int gpumem_nvml_init_async(uint32_t flags);
/* The warm-up's kept sample of device `index` into `sample`, once (waits for the warm-up): 0, or
 * -1 where none is kept (not asked for, NVML failed, already taken, a shutdown since). */
int gpumem_nvml_take_kept(int index, gpumem_nvml_sample *sample);
/* The warm-up's quick part of its kept samples (identity, memory, the process lists; every other
 * field -1), published before it takes the slow part: the number of devices (waits for it), or -1
 * where none comes (no warm-up, not kept, NVML failed); then device `index`'s into `sample`: 0, or
 * -1. The kept time below is theirs too. */
int gpumem_nvml_early_count(void);
int gpumem_nvml_take_early(int index, gpumem_nvml_sample *sample);
/* Wall-clock time (ms since the epoch) at which the kept samples began; -1 where none. */
double gpumem_nvml_kept_time_ms(void);
void gpumem_nvml_shutdown(void);
/* Device count, or -1 (see gpumem_nvml_last_error). */
int gpumem_nvml_device_count(void);
/* Driver and NVML versions, "" when unknown. */
const char *gpumem_nvml_driver_version(void);
const char *gpumem_nvml_version(void);
int gpumem_nvml_cuda_driver_version(void);
/* Fill one sample of device `index`: 0, or -1 when the device cannot be reached at all
 * (then sample->error says why). Fields the device does not support are -1. */
/* Flags: skip the PCIe byte counters (one-shot samples; the screens read them every few seconds),
 * skip each process's SM share (nvmlDeviceGetProcessUtilization: 1.4-2.7 ms of CPU a call on an
 * H200, ten times the rest of a sample; the screens read it every few seconds). */
enum { GPUMEM_SAMPLE_NO_PCIE = 1, GPUMEM_SAMPLE_NO_PROCESS_UTIL = 2 };
int gpumem_nvml_sample_device(int index, gpumem_nvml_sample *sample, uint32_t flags);
/* The quick part alone (identity, memory, the process lists; tens of microseconds): a process's
 * used bytes read again between samples (the ledger's sample at a library mark), with no effect on
 * the next full sample's rates or utilization. Same return as above. */
int gpumem_nvml_sample_quick(int index, gpumem_nvml_sample *sample);
/* The field names, comma-separated, in the order of `fields`. */
const char *gpumem_nvml_field_names(void);
uint32_t gpumem_nvml_sample_size(void);
const char *gpumem_nvml_last_error(void);

#endif
