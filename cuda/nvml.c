/*
 * nvml.c — NVML through dlopen with our own prototypes (see nvml.h for why).
 *
 * Every field is fetched on its own; a field the device does not support stays -1. Only errors
 * other than "not supported" are reported, in NVML's own words, in the sample's `error`.
 */
#define _GNU_SOURCE
#include "nvml_lib.h"
#include "nvml_constants.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static device_cache cache[GPUMEM_NVML_CACHE];
static char constants_dir[400]; /* set at init */

pthread_mutex_t gpumem_nvml_lock = PTHREAD_MUTEX_INITIALIZER;
void (*gpumem_nvml_on_shutdown)(void);
static __thread char last_error[GPUMEM_NVML_ERROR];


static void *sym(const char *name) { return dlsym(nv.lib, name); }

static int load(char *err, int errlen) {
  nv.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nv.lib) nv.lib = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
  if (!nv.lib) {
    snprintf(err, errlen, "no NVIDIA driver (libnvidia-ml.so.1) on this machine");
    return -1;
  }
  nv.init = (fn_void)sym("nvmlInit_v2");
  if (!nv.init) nv.init = (fn_void)sym("nvmlInit");
  nv.shutdown = (fn_void)sym("nvmlShutdown");
  nv.error_string = (fn_error_string)sym("nvmlErrorString");
  nv.driver_version = (fn_text)sym("nvmlSystemGetDriverVersion");
  nv.nvml_version = (fn_text)sym("nvmlSystemGetNVMLVersion");
  nv.cuda_driver_version = (fn_int_ptr)sym("nvmlSystemGetCudaDriverVersion_v2");
  nv.device_count = (fn_uint_ptr)sym("nvmlDeviceGetCount_v2");
  if (!nv.device_count) nv.device_count = (fn_uint_ptr)sym("nvmlDeviceGetCount");
  nv.handle_by_index = (fn_handle)sym("nvmlDeviceGetHandleByIndex_v2");
  if (!nv.handle_by_index) nv.handle_by_index = (fn_handle)sym("nvmlDeviceGetHandleByIndex");
  nv.name = (fn_dev_text)sym("nvmlDeviceGetName");
  nv.uuid = (fn_dev_text)sym("nvmlDeviceGetUUID");
  nv.pci_info = (fn_dev_ptr)sym("nvmlDeviceGetPciInfo_v3");
  nv.memory_v2 = (fn_dev_ptr)sym("nvmlDeviceGetMemoryInfo_v2");
  nv.memory_v1 = (fn_dev_ptr)sym("nvmlDeviceGetMemoryInfo");
  nv.utilization = (fn_dev_ptr)sym("nvmlDeviceGetUtilizationRates");
  nv.encoder = (fn_dev_util)sym("nvmlDeviceGetEncoderUtilization");
  nv.decoder = (fn_dev_util)sym("nvmlDeviceGetDecoderUtilization");
  nv.temperature = (fn_dev_kind_uint)sym("nvmlDeviceGetTemperature");
  nv.clock = (fn_dev_kind_uint)sym("nvmlDeviceGetClockInfo");
  nv.max_clock = (fn_dev_kind_uint)sym("nvmlDeviceGetMaxClockInfo");
  nv.power_usage = (fn_dev_uint)sym("nvmlDeviceGetPowerUsage");
  nv.power_limit = (fn_dev_uint)sym("nvmlDeviceGetEnforcedPowerLimit");
  nv.fan_speed = (fn_dev_uint)sym("nvmlDeviceGetFanSpeed");
  nv.performance_state = (fn_dev_int)sym("nvmlDeviceGetPerformanceState");
  nv.compute_procs[3] = (fn_dev_procs)sym("nvmlDeviceGetComputeRunningProcesses_v3");
  nv.compute_procs[2] = (fn_dev_procs)sym("nvmlDeviceGetComputeRunningProcesses_v2");
  nv.compute_procs[1] = (fn_dev_procs)sym("nvmlDeviceGetComputeRunningProcesses");
  nv.graphics_procs[3] = (fn_dev_procs)sym("nvmlDeviceGetGraphicsRunningProcesses_v3");
  nv.graphics_procs[2] = (fn_dev_procs)sym("nvmlDeviceGetGraphicsRunningProcesses_v2");
  nv.graphics_procs[1] = (fn_dev_procs)sym("nvmlDeviceGetGraphicsRunningProcesses");
  nv.field_values = (fn_dev_fields)sym("nvmlDeviceGetFieldValues");
  nv.process_utilization = (fn_dev_proc_util)sym("nvmlDeviceGetProcessUtilization");
  if (!nv.init || !nv.device_count || !nv.handle_by_index) {
    snprintf(err, errlen, "libnvidia-ml.so.1 lacks nvmlInit or nvmlDeviceGetCount: driver too old");
    dlclose(nv.lib);
    nv.lib = NULL;
    return -1;
  }
  return 0;
}

int gpumem_nvml_init_locked(char *err, int errlen) {
  if (nv.ready) return 0;
  if (!nv.lib && load(err, errlen) != 0) return -1;
  nvmlReturn_t r = nv.init();
  if (r != NVML_SUCCESS) {
    snprintf(err, errlen, "nvmlInit failed: %s", gpumem_nvml_words(r));
    return -2;
  }
  nv.driver[0] = nv.version[0] = 0;
  if (nv.driver_version) nv.driver_version(nv.driver, sizeof nv.driver);
  if (nv.nvml_version) nv.nvml_version(nv.version, sizeof nv.version);
  nv.cuda_version = -1;
  if (nv.cuda_driver_version && nv.cuda_driver_version(&nv.cuda_version) != NVML_SUCCESS) nv.cuda_version = -1;
  int major = 0, minor = 0;
  nv.bad_v3 = sscanf(nv.driver, "%d.%d", &major, &minor) == 2 && major == 535 && minor >= 43 && minor <= 86;
  gpumem_nvml_constants_dir(constants_dir, sizeof constants_dir);
  nv.ready = 1;
  return 0;
}

int gpumem_nvml_init(char *err, int errlen) {
  pthread_mutex_lock(&gpumem_nvml_lock);
  int rc = gpumem_nvml_init_locked(err, errlen);
  pthread_mutex_unlock(&gpumem_nvml_lock);
  return rc;
}

void gpumem_nvml_shutdown(void) {
  pthread_mutex_lock(&gpumem_nvml_lock);
  if (nv.ready && nv.shutdown) nv.shutdown();
  nv.ready = 0;
  memset(cache, 0, sizeof cache);
  if (gpumem_nvml_on_shutdown) gpumem_nvml_on_shutdown(); /* the warm-up forgets what it kept */
  pthread_mutex_unlock(&gpumem_nvml_lock);
}

const char *gpumem_nvml_driver_version(void) { return nv.driver; }
const char *gpumem_nvml_version(void) { return nv.version; }
int gpumem_nvml_cuda_driver_version(void) { return nv.cuda_version; }
const char *gpumem_nvml_last_error(void) { return last_error; }
uint32_t gpumem_nvml_sample_size(void) { return (uint32_t)sizeof(gpumem_nvml_sample); }

const char *gpumem_nvml_field_names(void) {
#define GPUMEM_NVML_NAME(name) #name ","
  static const char names[] = GPUMEM_NVML_FIELDS(GPUMEM_NVML_NAME);
#undef GPUMEM_NVML_NAME
  return names;
}

int gpumem_nvml_device_count(void) {
  if (!nv.ready) {
    snprintf(last_error, sizeof last_error, "NVML is not initialized");
    return -1;
  }
  unsigned int n = 0;
  nvmlReturn_t r = nv.device_count(&n);
  if (r != NVML_SUCCESS) {
    snprintf(last_error, sizeof last_error, "nvmlDeviceGetCount: %s", gpumem_nvml_words(r));
    return -1;
  }
  return (int)n;
}


#define FIELD(s, f) ((s)->fields[GPUMEM_NVML_F_##f])

static void read_uint(gpumem_nvml_sample *s, nvmlDevice_t d, fn_dev_uint fn, const char *what, int64_t *out) {
  unsigned int v = 0;
  if (!fn) return;
  nvmlReturn_t r = fn(d, &v);
  if (r == NVML_SUCCESS) *out = v;
  else gpumem_nvml_note(s, what, r);
}

static void read_clock(gpumem_nvml_sample *s, nvmlDevice_t d, fn_dev_kind_uint fn, int kind, const char *what, int64_t *out) {
  unsigned int v = 0;
  if (!fn) return;
  nvmlReturn_t r = fn(d, kind, &v);
  if (r == NVML_SUCCESS) *out = v;
  else gpumem_nvml_note(s, what, r);
}

int gpumem_nvml_sample_device(int index, gpumem_nvml_sample *s, uint32_t flags) {
  return gpumem_nvml_sample_parts(index, s, flags, SAMPLE_QUICK | SAMPLE_SLOW);
}

int gpumem_nvml_sample_quick(int index, gpumem_nvml_sample *s) {
  return gpumem_nvml_sample_parts(index, s, GPUMEM_SAMPLE_NO_PCIE, SAMPLE_QUICK);
}

/* Identity (read once a device), memory and the process lists: calls that take microseconds even
 * the first time in a process. */
static void sample_quick(gpumem_nvml_sample *s, nvmlDevice_t d, device_cache *c) {
  nvmlReturn_t r;
  if (!c->valid) {
    c->sm_clock_max_mhz = c->memory_clock_max_mhz = -1;
    if (nv.name) gpumem_nvml_note(s, "nvmlDeviceGetName", nv.name(d, c->name, sizeof c->name));
    if (nv.uuid) gpumem_nvml_note(s, "nvmlDeviceGetUUID", nv.uuid(d, c->uuid, sizeof c->uuid));
    if (nv.pci_info) {
      nvmlPciInfo_t pci;
      memset(&pci, 0, sizeof pci);
      r = nv.pci_info(d, &pci);
      if (r == NVML_SUCCESS) snprintf(c->pci_bus_id, sizeof c->pci_bus_id, "%s", pci.busId);
      else gpumem_nvml_note(s, "nvmlDeviceGetPciInfo", r);
    }
    gpumem_nvml_constants k;
    if (gpumem_nvml_constants_load(constants_dir, c->uuid, nv.driver, &k)) {
      c->sm_clock_max_mhz = k.sm_clock_max_mhz;
      c->memory_clock_max_mhz = k.memory_clock_max_mhz;
      c->unsupported |= k.unsupported;
    } else {
      c->max_clocks_pending = 1; /* slow (1.3-4.4 ms a call): read with the slow part */
      c->keep = 1; /* once this sample has also learnt which calls the device refuses */
    }
    c->valid = s->error[0] == 0; /* an identity read that failed is tried again next time */
  }
  memcpy(s->name, c->name, sizeof s->name);
  memcpy(s->uuid, c->uuid, sizeof s->uuid);
  memcpy(s->pci_bus_id, c->pci_bus_id, sizeof s->pci_bus_id);
  FIELD(s, sm_clock_max_mhz) = c->sm_clock_max_mhz;
  FIELD(s, memory_clock_max_mhz) = c->memory_clock_max_mhz;

  /* Memory: _v2 with its struct version set properly (size | 2<<24) reports the driver's reserve
   * apart from "used"; v1 counts that reserve as used. */
  nvmlMemory_v2_t m2;
  memset(&m2, 0, sizeof m2);
  m2.version = NVML_STRUCT_VERSION(sizeof m2, 2);
  r = nv.memory_v2 ? nv.memory_v2(d, &m2) : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (r == NVML_SUCCESS) {
    FIELD(s, memory_total_bytes) = (int64_t)m2.total;
    FIELD(s, memory_used_bytes) = (int64_t)m2.used;
    FIELD(s, memory_free_bytes) = (int64_t)m2.free;
    FIELD(s, memory_reserved_bytes) = (int64_t)m2.reserved;
  } else if (nv.memory_v1) {
    nvmlMemory_t m1;
    r = nv.memory_v1(d, &m1);
    if (r == NVML_SUCCESS) {
      FIELD(s, memory_total_bytes) = (int64_t)m1.total;
      FIELD(s, memory_used_bytes) = (int64_t)m1.used;
      FIELD(s, memory_free_bytes) = (int64_t)m1.free;
    } else {
      gpumem_nvml_note(s, "nvmlDeviceGetMemoryInfo", r);
    }
  }

  gpumem_nvml_read_processes(s, d);
}

/* The rest: the calls whose first call in a process is slow on a GSP-based GPU (utilization,
 * temperature, clocks, power), then each process's SM share. */
static void sample_slow(gpumem_nvml_sample *s, nvmlDevice_t d, device_cache *c, uint32_t flags) {
  nvmlReturn_t r;
  if (c->max_clocks_pending) {
    read_clock(s, d, nv.max_clock, NVML_CLOCK_SM, "nvmlDeviceGetMaxClockInfo", &c->sm_clock_max_mhz);
    read_clock(s, d, nv.max_clock, NVML_CLOCK_MEM, "nvmlDeviceGetMaxClockInfo", &c->memory_clock_max_mhz);
    c->max_clocks_pending = 0;
    FIELD(s, sm_clock_max_mhz) = c->sm_clock_max_mhz;
    FIELD(s, memory_clock_max_mhz) = c->memory_clock_max_mhz;
  }
  if (nv.utilization) {
    nvmlUtilization_t u;
    r = nv.utilization(d, &u);
    if (r == NVML_SUCCESS) {
      FIELD(s, gpu_utilization_percent) = u.gpu;
      FIELD(s, memory_utilization_percent) = u.memory;
    } else {
      gpumem_nvml_note(s, "nvmlDeviceGetUtilizationRates", r);
    }
  }
  unsigned int util = 0, period = 0;
  if (nv.encoder && !(c->unsupported & CALL_ENCODER)) {
    r = nv.encoder(d, &util, &period);
    if (r == NVML_SUCCESS) FIELD(s, encoder_utilization_percent) = util;
    else if (r == NVML_ERROR_NOT_SUPPORTED) c->unsupported |= CALL_ENCODER;
    else gpumem_nvml_note(s, "nvmlDeviceGetEncoderUtilization", r);
  }
  if (nv.decoder && !(c->unsupported & CALL_DECODER)) {
    r = nv.decoder(d, &util, &period);
    if (r == NVML_SUCCESS) FIELD(s, decoder_utilization_percent) = util;
    else if (r == NVML_ERROR_NOT_SUPPORTED) c->unsupported |= CALL_DECODER;
    else gpumem_nvml_note(s, "nvmlDeviceGetDecoderUtilization", r);
  }
  read_clock(s, d, nv.temperature, 0, "nvmlDeviceGetTemperature", &FIELD(s, temperature_celsius));
  read_uint(s, d, nv.power_limit, "nvmlDeviceGetEnforcedPowerLimit", &FIELD(s, power_limit_milliwatts));
  if (nv.fan_speed && !(c->unsupported & CALL_FAN)) {
    unsigned int fan = 0;
    r = nv.fan_speed(d, &fan);
    if (r == NVML_SUCCESS) FIELD(s, fan_speed_percent) = fan;
    else if (r == NVML_ERROR_NOT_SUPPORTED) c->unsupported |= CALL_FAN; /* passively cooled */
    else gpumem_nvml_note(s, "nvmlDeviceGetFanSpeed", r);
  }
  read_clock(s, d, nv.clock, NVML_CLOCK_SM, "nvmlDeviceGetClockInfo", &FIELD(s, sm_clock_mhz));
  read_clock(s, d, nv.clock, NVML_CLOCK_MEM, "nvmlDeviceGetClockInfo", &FIELD(s, memory_clock_mhz));
  read_clock(s, d, nv.clock, NVML_CLOCK_GRAPHICS, "nvmlDeviceGetClockInfo", &FIELD(s, graphics_clock_mhz));
  if (nv.performance_state) {
    int p = 0;
    r = nv.performance_state(d, &p);
    if (r == NVML_SUCCESS && p >= 0 && p <= 15) FIELD(s, performance_state) = p;
    else gpumem_nvml_note(s, "nvmlDeviceGetPerformanceState", r);
  }

  /* Instant power and PCIe byte counters come in one field-values call: microseconds, where
   * nvmlDeviceGetPowerUsage averages and nvmlDeviceGetPcieThroughput blocks 20 ms a direction. */
  nvmlFieldValue_t fv[3];
  memset(fv, 0, sizeof fv);
  fv[0].fieldId = NVML_FI_DEV_POWER_INSTANT;
  fv[1].fieldId = NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
  fv[2].fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
  /* The PCIe counters cost ~270 us; a one-shot sample skips them (a rate needs two samples). */
  int n_fields = (flags & GPUMEM_SAMPLE_NO_PCIE) ? 1 : 3;
  r = nv.field_values ? nv.field_values(d, n_fields, fv) : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (r == NVML_SUCCESS && fv[0].nvmlReturn == NVML_SUCCESS) FIELD(s, power_draw_milliwatts) = fv[0].value.uiVal;
  else read_uint(s, d, nv.power_usage, "nvmlDeviceGetPowerUsage", &FIELD(s, power_draw_milliwatts));
  if (r == NVML_SUCCESS && n_fields == 3 && fv[1].nvmlReturn == NVML_SUCCESS && fv[2].nvmlReturn == NVML_SUCCESS) {
    FIELD(s, pcie_rx_bytes_counter) = (int64_t)fv[1].value.ullVal;
    FIELD(s, pcie_tx_bytes_counter) = (int64_t)fv[2].value.ullVal;
    FIELD(s, pcie_counter_time_us) = fv[1].timestamp;
  }

  if (!(flags & GPUMEM_SAMPLE_NO_PROCESS_UTIL)) gpumem_nvml_read_process_utilization(s, d, c);
  if (c->keep && c->valid && !s->error[0]) {
    gpumem_nvml_constants k = {c->sm_clock_max_mhz, c->memory_clock_max_mhz, c->unsupported};
    gpumem_nvml_constants_store(constants_dir, c->uuid, nv.driver, &k); /* best effort: a read-only home keeps nothing */
    c->keep = 0;
  }
}

int gpumem_nvml_sample_parts(int index, gpumem_nvml_sample *s, uint32_t flags, int parts) {
  if (parts & SAMPLE_QUICK) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < GPUMEM_NVML_NFIELDS; i++) s->fields[i] = -1;
  }
  if (!nv.ready) {
    snprintf(s->error, sizeof s->error, "NVML is not initialized");
    return -1;
  }
  nvmlDevice_t d = NULL;
  nvmlReturn_t r = nv.handle_by_index((unsigned int)index, &d);
  if (r != NVML_SUCCESS) {
    snprintf(s->error, sizeof s->error, "nvmlDeviceGetHandleByIndex(%d): %s", index, gpumem_nvml_words(r));
    return -1;
  }
  /* A device past the cache is sampled whole, on a cache of its own for this call. */
  static __thread device_cache scratch;
  device_cache *c = index >= 0 && index < GPUMEM_NVML_CACHE ? &cache[index] : &scratch;
  if (c == &scratch) memset(&scratch, 0, sizeof scratch);
  if (parts & SAMPLE_QUICK) sample_quick(s, d, c);
  if (parts & SAMPLE_SLOW) sample_slow(s, d, c, flags);
  return 0;
}
