/*
 * nvml_lib.h — what the parts of libgpumem's NVML sampling share inside the library (not its API:
 * that is nvml.h): NVML's types as we declare them, the table of NVML functions loaded with dlopen
 * (nvml_lib.c), and the per-device cache.
 */
#ifndef GPUMEM_NVML_LIB_H
#define GPUMEM_NVML_LIB_H

#include "nvml.h"

#include <pthread.h>

#define GPUMEM_HIDDEN __attribute__((visibility("hidden")))

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
};
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL)
#define NVML_STRUCT_VERSION(size, ver) ((unsigned int)(size) | ((unsigned int)(ver) << 24))

typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
/* Process records of the three list APIs; NVML steps through the caller's array by these sizes. */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t; /* the _v3 functions take this same layout in current drivers */
/* One utilization sample of a process (nvmlDeviceGetProcessUtilization): percentages of the
 * sample period, the CPU timestamp (µs) the sample was taken at. */
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;
typedef struct {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
  } value;
} nvmlFieldValue_t;

enum { NVML_FI_DEV_POWER_INSTANT = 186, NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197, NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198 };
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };

typedef nvmlReturn_t (*fn_void)(void);
typedef const char *(*fn_error_string)(nvmlReturn_t);
typedef nvmlReturn_t (*fn_text)(char *, unsigned int);
typedef nvmlReturn_t (*fn_int_ptr)(int *);
typedef nvmlReturn_t (*fn_uint_ptr)(unsigned int *);
typedef nvmlReturn_t (*fn_handle)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*fn_dev_text)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*fn_dev_ptr)(nvmlDevice_t, void *);
typedef nvmlReturn_t (*fn_dev_uint)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*fn_dev_int)(nvmlDevice_t, int *);
typedef nvmlReturn_t (*fn_dev_util)(nvmlDevice_t, unsigned int *, unsigned int *);
typedef nvmlReturn_t (*fn_dev_kind_uint)(nvmlDevice_t, int, unsigned int *);
typedef nvmlReturn_t (*fn_dev_procs)(nvmlDevice_t, unsigned int *, void *);
typedef nvmlReturn_t (*fn_dev_fields)(nvmlDevice_t, int, nvmlFieldValue_t *);
typedef nvmlReturn_t (*fn_dev_proc_util)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *, unsigned long long);

typedef struct gpumem_nvml_lib {
  void *lib;
  int ready;
  fn_void init, shutdown;
  fn_error_string error_string;
  fn_text driver_version, nvml_version;
  fn_int_ptr cuda_driver_version;
  fn_uint_ptr device_count;
  fn_handle handle_by_index;
  fn_dev_text name, uuid;
  fn_dev_ptr pci_info, memory_v2, memory_v1, utilization;
  fn_dev_util encoder, decoder;
  fn_dev_kind_uint temperature, clock, max_clock;
  fn_dev_uint power_usage, power_limit, fan_speed;
  fn_dev_int performance_state;
  fn_dev_procs compute_procs[4], graphics_procs[4]; /* index = API version 1..3 */
  fn_dev_fields field_values;
  fn_dev_proc_util process_utilization;
  int bad_v3; /* drivers 535.43–535.86 return wrong _v3 process data */
  char driver[96], version[96];
  int cuda_version;
} gpumem_nvml_lib;

/* The loaded NVML (nvml_lib.c; nvml.c's loader fills it). */
extern gpumem_nvml_lib nv GPUMEM_HIDDEN;
/* NVML's words for an error code. */
GPUMEM_HIDDEN const char *gpumem_nvml_words(nvmlReturn_t r);

/* What never changes while the driver is loaded, read once per device: identity and maximum
 * clocks (nvmlDeviceGetMaxClockInfo costs ~1.3 ms a call on an H100), and the calls the device
 * answered "not supported" (a fan query that is refused still costs ~160 us each time). */
#define GPUMEM_NVML_CACHE 64
typedef struct {
  int valid;
  char name[GPUMEM_NVML_TEXT], uuid[GPUMEM_NVML_TEXT], pci_bus_id[GPUMEM_NVML_TEXT];
  int64_t sm_clock_max_mhz, memory_clock_max_mhz;
  uint32_t unsupported; /* bit per call, below */
  int keep;             /* read from the device this run: kept for the next (nvml_constants.h) */
  int max_clocks_pending; /* no constants kept: the maximum clocks are read by the slow part */
  unsigned long long util_seen_us; /* the newest process utilization sample read so far */
} device_cache;
enum { CALL_FAN = 1u << 0, CALL_ENCODER = 1u << 1, CALL_DECODER = 1u << 2, CALL_FIELDS = 1u << 3, CALL_PROCESS_UTIL = 1u << 4 };
/* Held while NVML starts (nvml.c); the warm-up (nvml_warm_up.c) holds it from init to its last sample. */
extern pthread_mutex_t gpumem_nvml_lock GPUMEM_HIDDEN;
/* gpumem_nvml_init with gpumem_nvml_lock held. */
GPUMEM_HIDDEN int gpumem_nvml_init_locked(char *err, int errlen);
/* Called by gpumem_nvml_shutdown with gpumem_nvml_lock held: the warm-up (nvml_warm_up.c) sets it to
 * drop its kept samples (a sample of an NVML that is gone is not one of the next). Set, not
 * called by name, so that the warm-up depends on the sampling and not the other way round. */
extern void (*gpumem_nvml_on_shutdown)(void) GPUMEM_HIDDEN;
/* Keep the first unexpected error of a sample in `s->error` ("not supported" is an answer). */
GPUMEM_HIDDEN void gpumem_nvml_note(gpumem_nvml_sample *s, const char *what, nvmlReturn_t r);
/* The device's compute and graphics processes into `s` (nvml_processes.c), and then each one's SM
 * share (a slow first call: it comes with the slow part of a sample). */
GPUMEM_HIDDEN void gpumem_nvml_read_processes(gpumem_nvml_sample *s, nvmlDevice_t d);
GPUMEM_HIDDEN void gpumem_nvml_read_process_utilization(gpumem_nvml_sample *s, nvmlDevice_t d, device_cache *c);
/* A sample in two parts (nvml.c): SAMPLE_QUICK starts it (identity, memory, the process lists: tens
 * of microseconds even the first time), SAMPLE_SLOW completes the same `s` (the calls whose first
 * call is slow, and the processes' SM shares). gpumem_nvml_sample_device is both at once; the
 * warm-up publishes the quick part before it takes the slow one. */
enum { SAMPLE_QUICK = 1, SAMPLE_SLOW = 2 };
GPUMEM_HIDDEN int gpumem_nvml_sample_parts(int index, gpumem_nvml_sample *s, uint32_t flags, int parts);

#endif
