/*
 * warm_up_napi.c — the warm-up's start as a Node-API module. The CLI starts NVML's warm-up before
 * anything else (src/ffi/warm-up.ts): loading libgpumem with process.dlopen and calling this one
 * function takes ~0.3 ms, where importing bun:ffi and binding one symbol (a stub compiled for it)
 * took ~1.4 ms, all of it before the thread could start. Everything else still goes through
 * bun:ffi. Node-API is declared here (no headers needed), weakly: outside a Node-API host the
 * module registers nothing and the library loads as before.
 */
#include "nvml.h"

#include <stddef.h>
#include <stdint.h>

typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status; /* napi_ok is 0 */
typedef napi_value (*napi_callback)(napi_env, napi_callback_info);

extern napi_status napi_create_function(napi_env, const char *, size_t, napi_callback, void *, napi_value *) __attribute__((weak));
extern napi_status napi_set_named_property(napi_env, napi_value, const char *, napi_value) __attribute__((weak));
extern napi_status napi_get_cb_info(napi_env, napi_callback_info, size_t *, napi_value *, napi_value *, void **) __attribute__((weak));
extern napi_status napi_get_value_uint32(napi_env, napi_value, uint32_t *) __attribute__((weak));

/* warmUp(flags): gpumem_nvml_init_async(flags); returns undefined (problems surface at Nvml.open). */
static napi_value warm_up(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  uint32_t flags = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == 0 && argc >= 1) napi_get_value_uint32(env, argv[0], &flags);
  gpumem_nvml_init_async(flags);
  return NULL;
}

napi_value napi_register_module_v1(napi_env env, napi_value exports) {
  napi_value fn;
  if (!napi_create_function || !napi_set_named_property || !napi_get_cb_info || !napi_get_value_uint32) return exports;
  if (napi_create_function(env, "warmUp", (size_t)-1, warm_up, NULL, &fn) == 0) napi_set_named_property(env, exports, "warmUp", fn);
  return exports;
}
