// A stand-in for a CPython 3.14 process, for test/attach/pep768.test.ts: the memory that PEP 768's
// remote execution reads and writes, laid out as CPython 3.14's headers define it
// (Include/internal/pycore_debug_offsets.h, Doc/howto/remote_debugging.rst), written out here on its
// own (not shared with cuda/inject.c, so that a slip in either shows). It exports what makes the
// helper take it for CPython 3.14.0 (Py_Version, Py_AddPendingCall, PyRun_SimpleString: build it with
// -rdynamic), keeps the runtime in a `.PyRuntime` section, says `ready` on stdout, and on a line on
// stdin prints, as JSON, every byte of the image that changed and the three fields PEP 768 writes.
//   py314_image VARIANT   ok | cookie | version | layout | disabled | pending | finalizing
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// _Py_DebugOffsets, 3.14: every group and field in the headers' order.
struct debug_offsets {
  char cookie[8];
  uint64_t version, free_threaded;
  struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
  struct {
    uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins, ceval_gil, gil_runtime_state,
        gil_runtime_state_enabled, gil_runtime_state_locked, gil_runtime_state_holder, code_object_generation, tlbc_generation;
  } interpreter_state;
  struct { uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status; } thread_state;
  struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index; } interpreter_frame;
  struct {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames, localspluskinds, co_code_adaptive, co_tlbc;
  } code_object;
  struct { uint64_t size, ob_type; } pyobject;
  struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
  struct { uint64_t size, ob_item, ob_size; } tuple_object;
  struct { uint64_t size, ob_item, ob_size; } list_object;
  struct { uint64_t size, used, table, mask; } set_object;
  struct { uint64_t size, ma_keys, ma_values; } dict_object;
  struct { uint64_t size, ob_fval; } float_object;
  struct { uint64_t size, lv_tag, ob_digit; } long_object;
  struct { uint64_t size, ob_size, ob_sval; } bytes_object;
  struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
  struct { uint64_t size, collecting; } gc;
  struct { uint64_t size, gi_name, gi_iframe, gi_frame_state; } gen_object;
  struct { uint64_t next, prev; } llist_node;
  struct {
    uint64_t eval_breaker, remote_debugger_support, remote_debugging_enabled, debugger_pending_call, debugger_script_path,
        debugger_script_path_size;
  } debugger_support;
};

// The parts of the runtime, interpreter and thread state that the protocol touches, with room
// around them as in the real structures.
struct runtime {
  struct debug_offsets debug_offsets;  // first, as in _PyRuntimeState
  int initialized, core_initialized;
  void *finalizing;
  struct { void *head, *main; int64_t next_id; } interpreters;
  char rest[512];
};

struct remote_debugger_support {
  int32_t debugger_pending_call;
  char debugger_script_path[512];  // Py_MAX_SCRIPT_PATH_SIZE
};

struct tstate {
  struct tstate *prev, *next;
  void *interp;
  uintptr_t eval_breaker;
  void *current_frame;
  int status;
  unsigned long thread_id, native_thread_id;
  void *datastack_chunk;
  char middle[200];
  struct remote_debugger_support remote_debugger_support;
  char tail[64];
};

struct config {
  int isolated, use_environment;
  char middle[120];
  int remote_debug;
  char tail[40];
};

struct interp {
  struct interp *next;
  int64_t id;
  char gil[96];
  struct { struct tstate *head, *main; } threads;
  char middle[256];
  struct config config;
  char tail[128];
};

__attribute__((section(".PyRuntime"), used)) struct runtime _PyRuntime;
const uint32_t Py_Version = 0x030e00f0;  // 3.14.0 final
int Py_AddPendingCall(int (*fn)(void *), void *arg) {
  (void)fn, (void)arg;
  return -1;
}
int PyRun_SimpleString(const char *s) {
  (void)s;
  return -1;
}

static struct interp *main_interp, *sub_interp;
static struct tstate *main_ts, *other_ts;

static void fill_offsets(struct debug_offsets *d) {
  memcpy(d->cookie, "xdebugpy", 8);
  d->version = 0x030e00f0;
  d->runtime_state.size = sizeof(struct runtime);
  d->runtime_state.finalizing = offsetof(struct runtime, finalizing);
  d->runtime_state.interpreters_head = offsetof(struct runtime, interpreters.head);
  d->interpreter_state.size = sizeof(struct interp);
  d->interpreter_state.id = offsetof(struct interp, id);
  d->interpreter_state.next = offsetof(struct interp, next);
  d->interpreter_state.threads_head = offsetof(struct interp, threads.head);
  d->interpreter_state.threads_main = offsetof(struct interp, threads.main);
  d->interpreter_state.gil_runtime_state = offsetof(struct interp, gil);
  d->thread_state.size = sizeof(struct tstate);
  d->thread_state.prev = offsetof(struct tstate, prev);
  d->thread_state.next = offsetof(struct tstate, next);
  d->thread_state.interp = offsetof(struct tstate, interp);
  d->thread_state.current_frame = offsetof(struct tstate, current_frame);
  d->thread_state.thread_id = offsetof(struct tstate, thread_id);
  d->thread_state.native_thread_id = offsetof(struct tstate, native_thread_id);
  d->thread_state.datastack_chunk = offsetof(struct tstate, datastack_chunk);
  d->thread_state.status = offsetof(struct tstate, status);
  // Object layouts: what a real 3.14 x86-64 says, unused by the protocol.
  d->pyobject.size = 16, d->pyobject.ob_type = 8;
  d->gen_object.size = 96;
  d->llist_node.next = 0, d->llist_node.prev = 8;
  d->debugger_support.eval_breaker = offsetof(struct tstate, eval_breaker);
  d->debugger_support.remote_debugger_support = offsetof(struct tstate, remote_debugger_support);
  d->debugger_support.remote_debugging_enabled = offsetof(struct interp, config.remote_debug);
  d->debugger_support.debugger_pending_call = offsetof(struct remote_debugger_support, debugger_pending_call);
  d->debugger_support.debugger_script_path = offsetof(struct remote_debugger_support, debugger_script_path);
  d->debugger_support.debugger_script_path_size = sizeof(((struct remote_debugger_support *)0)->debugger_script_path);
}

struct region {
  const char *name;
  void *at;
  size_t len;
  void *pristine;
};

static void report(struct region *r, int n) {
  printf("{\"changed\": [");
  int first = 1;
  for (int i = 0; i < n; i++) {
    const uint8_t *now = r[i].at, *was = r[i].pristine;
    for (size_t k = 0; k < r[i].len;) {
      if (now[k] == was[k]) {
        k++;
        continue;
      }
      size_t end = k;
      while (end < r[i].len && now[end] != was[end]) end++;
      printf("%s{\"where\": \"%s\", \"offset\": %zu, \"len\": %zu}", first ? "" : ", ", r[i].name, k, end - k);
      first = 0;
      k = end;
    }
  }
  char path[513];
  memcpy(path, main_ts->remote_debugger_support.debugger_script_path, 512);
  path[512] = 0;
  printf("], \"script_path\": \"%s\", \"pending\": %d, \"eval_breaker\": %lu, \"fields\": {\"path\": %zu, \"pending\": %zu, \"eval_breaker\": %zu}}\n", path,
         main_ts->remote_debugger_support.debugger_pending_call, (unsigned long)main_ts->eval_breaker,
         offsetof(struct tstate, remote_debugger_support.debugger_script_path), offsetof(struct tstate, remote_debugger_support.debugger_pending_call),
         offsetof(struct tstate, eval_breaker));
}

int main(int argc, char **argv) {
  const char *variant = argc > 1 ? argv[1] : "ok";
  fill_offsets(&_PyRuntime.debug_offsets);
  main_interp = calloc(1, sizeof *main_interp);
  sub_interp = calloc(1, sizeof *sub_interp);
  main_ts = calloc(1, sizeof *main_ts);
  other_ts = calloc(1, sizeof *other_ts);
  // A subinterpreter at the list's head (as Py_NewInterpreter puts it), the main one after it; the
  // main thread state second in its interpreter's list, so that only threads.main leads to it.
  _PyRuntime.interpreters.head = sub_interp;
  _PyRuntime.interpreters.main = main_interp;
  sub_interp->id = 1, sub_interp->next = main_interp, sub_interp->config.remote_debug = 1;
  main_interp->id = 0, main_interp->config.remote_debug = 1;
  main_interp->threads.head = other_ts, main_interp->threads.main = main_ts;
  other_ts->next = main_ts, main_ts->prev = other_ts;
  other_ts->interp = main_ts->interp = main_interp;
  main_ts->native_thread_id = (unsigned long)getpid();
  other_ts->native_thread_id = (unsigned long)getpid() + 1;
  // A path left by an earlier, longer script, and two bits of the eval breaker already set: the
  // writer must end its path with a NUL and keep the bits.
  strcpy(main_ts->remote_debugger_support.debugger_script_path, "/an/earlier/script/whose/path/is/longer/than/any/the/test/writes/at-all/x.py");
  main_ts->eval_breaker = 0x101;
  if (!strcmp(variant, "cookie")) memcpy(_PyRuntime.debug_offsets.cookie, "xdebugpz", 8);
  else if (!strcmp(variant, "version")) _PyRuntime.debug_offsets.version = 0x030f00a1;  // 3.15: another layout
  else if (!strcmp(variant, "layout")) _PyRuntime.debug_offsets.debugger_support.debugger_script_path = sizeof(struct tstate);
  else if (!strcmp(variant, "disabled")) main_interp->config.remote_debug = 0;
  else if (!strcmp(variant, "pending")) main_ts->remote_debugger_support.debugger_pending_call = 1;
  else if (!strcmp(variant, "finalizing")) _PyRuntime.finalizing = main_ts;
  else if (strcmp(variant, "ok")) {
    fprintf(stderr, "unknown variant %s\n", variant);
    return 2;
  }
  struct region r[] = {
      {"runtime", &_PyRuntime, sizeof _PyRuntime, NULL},          {"interp_main", main_interp, sizeof *main_interp, NULL},
      {"interp_sub", sub_interp, sizeof *sub_interp, NULL},       {"tstate_main", main_ts, sizeof *main_ts, NULL},
      {"tstate_other", other_ts, sizeof *other_ts, NULL},
  };
  int n = sizeof r / sizeof r[0];
  for (int i = 0; i < n; i++) {
    r[i].pristine = malloc(r[i].len);
    memcpy(r[i].pristine, r[i].at, r[i].len);
  }
  printf("ready\n");
  fflush(stdout);
  char line[64];
  if (!fgets(line, sizeof line, stdin)) return 3;
  report(r, n);
  return 0;
}
