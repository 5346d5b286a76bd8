/*
 * nvml_processes.c — the processes on a device: NVML's process lists (newest API first) and each
 * process's share of SM time (nvmlDeviceGetProcessUtilization).
 */
#define _GNU_SOURCE
#include "nvml_lib.h"

#include <string.h>

#define FIELD(s, f) ((s)->fields[GPUMEM_NVML_F_##f])

static void add_process(gpumem_nvml_sample *s, uint32_t pid, unsigned long long used, uint32_t kind) {
  int64_t bytes = used == NVML_VALUE_NOT_AVAILABLE_ULL ? -1 : (int64_t)used;
  for (uint32_t i = 0; i < s->n_processes; i++) {
    if (s->processes[i].pid == pid) {
      s->processes[i].kind |= kind;
      if (s->processes[i].used_bytes < bytes) s->processes[i].used_bytes = bytes;
      return;
    }
  }
  if (s->n_processes >= GPUMEM_NVML_MAX_PROCESSES) return;
  s->processes[s->n_processes].pid = pid;
  s->processes[s->n_processes].kind = kind;
  s->processes[s->n_processes].used_bytes = bytes;
  s->processes[s->n_processes].sm_percent = -1;
  s->n_processes++;
}

/* Each listed process's SM share from NVML's utilization samples taken since the last call (the
 * newest sample of each pid wins). A GPU that does not report it (NOT_SUPPORTED: MIG, vGPU, older
 * boards) is not asked again; NOT_FOUND means no sample since the last call: every share stays -1. */
void gpumem_nvml_read_process_utilization(gpumem_nvml_sample *s, nvmlDevice_t d, device_cache *c) {
  if (!nv.process_utilization || (c->unsupported & CALL_PROCESS_UTIL) || s->n_processes == 0) return;
  static __thread nvmlProcessUtilizationSample_t buf[GPUMEM_NVML_MAX_PROCESSES * 4];
  static __thread unsigned long long newest[GPUMEM_NVML_MAX_PROCESSES];
  unsigned int count = GPUMEM_NVML_MAX_PROCESSES * 4;
  nvmlReturn_t r = nv.process_utilization(d, buf, &count, c->util_seen_us);
  if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) {
    c->unsupported |= CALL_PROCESS_UTIL;
    return;
  }
  if (r == NVML_ERROR_NOT_FOUND) return;
  if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) {
    gpumem_nvml_note(s, "nvmlDeviceGetProcessUtilization", r);
    return;
  }
  if (count > GPUMEM_NVML_MAX_PROCESSES * 4) count = GPUMEM_NVML_MAX_PROCESSES * 4;
  memset(newest, 0, sizeof newest);
  for (unsigned int k = 0; k < count; k++) {
    const nvmlProcessUtilizationSample_t *u = &buf[k];
    if (u->timeStamp > c->util_seen_us) c->util_seen_us = u->timeStamp;
    for (uint32_t i = 0; i < s->n_processes; i++) {
      if (s->processes[i].pid != u->pid || u->timeStamp < newest[i]) continue;
      newest[i] = u->timeStamp;
      s->processes[i].sm_percent = u->smUtil <= 100 ? (int32_t)u->smUtil : -1;
    }
  }
}

/* Try the newest process-list API first and step down; each steps through its own record size. */
static int64_t read_processes(gpumem_nvml_sample *s, nvmlDevice_t d, fn_dev_procs *fns, uint32_t kind, const char *what) {
  static __thread nvmlProcessInfo_v2_t buf[GPUMEM_NVML_MAX_PROCESSES * 2];
  for (int v = 3; v >= 1; v--) {
    if (!fns[v] || (v == 3 && nv.bad_v3)) continue;
    unsigned int count = GPUMEM_NVML_MAX_PROCESSES;
    nvmlReturn_t r = fns[v](d, &count, buf);
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND || r == NVML_ERROR_NOT_SUPPORTED) continue;
    if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) {
      gpumem_nvml_note(s, what, r);
      return -1;
    }
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) count = GPUMEM_NVML_MAX_PROCESSES; /* listed: the first ones */
    for (unsigned int i = 0; i < count && i < GPUMEM_NVML_MAX_PROCESSES; i++) {
      if (v == 1) {
        const nvmlProcessInfo_v1_t *p = (const nvmlProcessInfo_v1_t *)buf + i;
        add_process(s, p->pid, p->usedGpuMemory, kind);
      } else {
        add_process(s, buf[i].pid, buf[i].usedGpuMemory, kind);
      }
    }
    if (!s->process_api || v < (int)s->process_api) s->process_api = (uint32_t)v;
    return count;
  }
  return -1;
}

void gpumem_nvml_read_processes(gpumem_nvml_sample *s, nvmlDevice_t d) {
  int64_t compute = read_processes(s, d, nv.compute_procs, GPUMEM_PROCESS_COMPUTE, "nvmlDeviceGetComputeRunningProcesses");
  int64_t graphics = read_processes(s, d, nv.graphics_procs, GPUMEM_PROCESS_GRAPHICS, "nvmlDeviceGetGraphicsRunningProcesses");
  if (compute >= 0 || graphics >= 0) FIELD(s, process_count) = s->n_processes;
}
