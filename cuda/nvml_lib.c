/*
 * nvml_lib.c — the table of NVML functions (filled by nvml.c's loader) and NVML's words for its
 * errors: what the sampling's parts share, below them all.
 */
#define _GNU_SOURCE
#include "nvml_lib.h"

#include <stdio.h>

gpumem_nvml_lib nv;

const char *gpumem_nvml_words(nvmlReturn_t r) {
  return nv.error_string ? nv.error_string(r) : "unknown NVML error";
}

/* Keep the first unexpected error of a sample; "not supported" is an answer, not an error. */
void gpumem_nvml_note(gpumem_nvml_sample *s, const char *what, nvmlReturn_t r) {
  if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) return;
  if (s->error[0]) return;
  snprintf(s->error, sizeof s->error, "%s: %s", what, gpumem_nvml_words(r));
}
