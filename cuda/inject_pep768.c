// CPython 3.14+: PEP 768's debugger fields written with every thread stopped (cuda/inject_common.h).
#define _GNU_SOURCE
#include "inject_common.h"

#if defined(__x86_64__)

// CPython 3.14's _Py_DebugOffsets (Include/internal/pycore_debug_offsets.h): the 8-byte cookie, then
// 94 uint64_t; these are the ones used, by index after the cookie. The table's layout holds within a
// minor version and changes between them, so any other minor is refused, never guessed.
#define DBG_COOKIE "xdebugpy"
enum {
  DBG_VERSION = 0,
  DBG_RUNTIME_SIZE = 2,
  DBG_RUNTIME_FINALIZING = 3,
  DBG_RUNTIME_INTERPRETERS_HEAD = 4,
  DBG_INTERP_SIZE = 5,
  DBG_INTERP_ID = 6,
  DBG_INTERP_NEXT = 7,
  DBG_INTERP_THREADS_MAIN = 9,
  DBG_TSTATE_SIZE = 21,
  DBG_TSTATE_NATIVE_THREAD_ID = 27,
  DBG_EVAL_BREAKER = 88,            // in the thread state (uintptr_t)
  DBG_REMOTE_SUPPORT = 89,          // in the thread state: _PyRemoteDebuggerSupport
  DBG_REMOTE_ENABLED = 90,          // in the interpreter: config.remote_debug (int)
  DBG_PENDING_CALL = 91,            // in the support struct (int32_t)
  DBG_SCRIPT_PATH = 92,             // in the support struct (char[size])
  DBG_SCRIPT_PATH_SIZE = 93,
  DBG_WORDS = 94,
};
#define DBG_MINOR 14
#define PY_EVAL_PLEASE_STOP_BIT (1u << 5)  // Include/internal/pycore_ceval.h, 3.14

struct dbg {
  char cookie[8];
  uint64_t w[DBG_WORDS];
};

// Every offset used lands inside the structure it belongs to, whose size is sane: a table that says
// otherwise is not 3.14's layout (or not a table at all). The field at fault, or NULL.
static const char *dbg_implausible(const struct dbg *d) {
  const uint64_t *w = d->w;
  uint64_t rs = w[DBG_RUNTIME_SIZE], is = w[DBG_INTERP_SIZE], ts = w[DBG_TSTATE_SIZE], ps = w[DBG_SCRIPT_PATH_SIZE];
  if (rs < sizeof(struct dbg) || rs > (64u << 20)) return "runtime_state.size";
  if (w[DBG_RUNTIME_FINALIZING] > rs - 8 || w[DBG_RUNTIME_FINALIZING] < sizeof(struct dbg)) return "runtime_state.finalizing";
  if (w[DBG_RUNTIME_INTERPRETERS_HEAD] > rs - 8 || w[DBG_RUNTIME_INTERPRETERS_HEAD] < sizeof(struct dbg)) return "runtime_state.interpreters_head";
  if (is < 64 || is > (64u << 20)) return "interpreter_state.size";
  if (w[DBG_INTERP_ID] > is - 8) return "interpreter_state.id";
  if (w[DBG_INTERP_NEXT] > is - 8) return "interpreter_state.next";
  if (w[DBG_INTERP_THREADS_MAIN] > is - 8) return "interpreter_state.threads_main";
  if (w[DBG_REMOTE_ENABLED] > is - 4) return "debugger_support.remote_debugging_enabled";
  if (ts < 64 || ts > (1u << 20)) return "thread_state.size";
  if (w[DBG_TSTATE_NATIVE_THREAD_ID] > ts - 8) return "thread_state.native_thread_id";
  if (w[DBG_EVAL_BREAKER] > ts - 8) return "debugger_support.eval_breaker";
  if (ps < 64 || ps > 4096) return "debugger_support.debugger_script_path_size";
  if (w[DBG_REMOTE_SUPPORT] > ts || w[DBG_PENDING_CALL] > ts || w[DBG_SCRIPT_PATH] > ts) return "debugger_support.remote_debugger_support";
  if (w[DBG_REMOTE_SUPPORT] + w[DBG_PENDING_CALL] + 4 > ts) return "debugger_support.debugger_pending_call";
  if (w[DBG_REMOTE_SUPPORT] + w[DBG_SCRIPT_PATH] + ps > ts) return "debugger_support.debugger_script_path";
  return NULL;
}

// Reads made while the threads are stopped: the first failure is kept (and later reads skipped) so
// that the threads are let go before the one-line error.
static char read_failed[256];

static void read_stopped(int pid, uint64_t addr, void *buf, size_t len, const char *what) {
  memset(buf, 0, len);
  if (read_failed[0] || read_target(pid, addr, buf, len) == 0) return;
  snprintf(read_failed, sizeof read_failed, "cannot read process %d's %s at 0x%llx (%s): not attaching", pid, what, (unsigned long long)addr, strerror(errno));
}

int remote_exec(int pid, const char *script) {
  struct target t;
  find_target(pid, &t);
  char ver[32];
  print_version(ver, sizeof ver, &t);
  if (t.major != 3 || t.minor < 14) die(EXIT_VERSION, "process %d runs Python %s: PEP 768 (remote-exec) needs 3.14 or newer", pid, ver);
  if (script[0] != '/') die(EXIT_USAGE, "the script path must be absolute: %s", script);
  if (!t.runtime) die(EXIT_VERSION, "process %d runs Python %s but its %s has no .PyRuntime section or _PyRuntime symbol", pid, ver, t.python_object);

  // Everything is read and checked before anything is written (a refusal writes nothing).
  struct dbg d;
  if (read_target(pid, t.runtime, &d, sizeof d) != 0) die(EXIT_PTRACE, "cannot read process %d's debug offsets: %s", pid, strerror(errno));
  if (memcmp(d.cookie, DBG_COOKIE, 8) != 0)
    die(EXIT_VERSION, "process %d runs Python %s but no CPython debug offsets start its runtime (no \"%s\" cookie): cannot attach", pid, ver, DBG_COOKIE);
  uint64_t hex = d.w[DBG_VERSION];
  int dmaj = (int)(hex >> 24) & 0xff, dmin = (int)(hex >> 16) & 0xff;
  if (dmaj != 3 || dmin != DBG_MINOR)
    die(EXIT_VERSION, "process %d's debug offsets are for Python %d.%d, whose layout this build does not know (it knows 3.%d): start it under `gpumem-tui run`", pid, dmaj, dmin,
        DBG_MINOR);
  if (t.micro >= 0 && (t.major != dmaj || t.minor != dmin))
    die(EXIT_VERSION, "process %d's debug offsets say Python %d.%d, its Py_Version %s: they disagree, not attaching", pid, dmaj, dmin, ver);
  const char *bad = dbg_implausible(&d);
  if (bad) die(EXIT_VERSION, "process %d's debug offsets disagree with CPython 3.%d's layout (%s): not attaching", pid, DBG_MINOR, bad);
  const uint64_t *w = d.w;
  size_t path_len = strlen(script) + 1, path_cap = (size_t)w[DBG_SCRIPT_PATH_SIZE];
  if (path_len > path_cap) die(EXIT_USAGE, "the script path is %zu bytes; the interpreter takes at most %zu: %s", path_len - 1, path_cap - 1, script);

  uint64_t started = stop_all_or_die(pid, &chld_set);

  // Stopped: the runtime, interpreter and thread state cannot change under the reads and writes.
  char why[512] = "";
  int code = 0;
  uint64_t finalizing = 0, interp = 0, tstate = 0, main_tid = 0, breaker = 0;
  int32_t enabled = 0, pending = 0;
  static char old_path[4096];
  read_stopped(pid, t.runtime + w[DBG_RUNTIME_FINALIZING], &finalizing, 8, "runtime");
  read_stopped(pid, t.runtime + w[DBG_RUNTIME_INTERPRETERS_HEAD], &interp, 8, "runtime");
  // The main interpreter (id 0) is the last of the list: subinterpreters are put at its head.
  int64_t id = -1;
  for (int n = 0; interp && n < 1024; n++) {
    read_stopped(pid, interp + w[DBG_INTERP_ID], &id, 8, "interpreter state");
    if (id == 0 || read_failed[0]) break;
    read_stopped(pid, interp + w[DBG_INTERP_NEXT], &interp, 8, "interpreter state");
  }
  if (id != 0) interp = 0;
  if (read_failed[0]) {
    snprintf(why, sizeof why, "%s", read_failed);
    code = EXIT_VERSION;
  } else if (finalizing) {
    snprintf(why, sizeof why, "process %d is exiting (its interpreter is finalizing)", pid);
    code = EXIT_EXITED;
  } else if (!interp) {
    snprintf(why, sizeof why, "process %d has no main interpreter (yet): try again", pid);
    code = EXIT_OTHER;
  }
  if (!code) {
    read_stopped(pid, interp + w[DBG_REMOTE_ENABLED], &enabled, 4, "interpreter state");
    read_stopped(pid, interp + w[DBG_INTERP_THREADS_MAIN], &tstate, 8, "interpreter state");
    if (read_failed[0]) {
      snprintf(why, sizeof why, "%s", read_failed);
      code = EXIT_VERSION;
    } else if (enabled != 1) {
      snprintf(why, sizeof why,
               "process %d has remote debugging turned off (PYTHON_DISABLE_REMOTE_DEBUG, -X disable-remote-debug, or a build --without-remote-debug): start it without that, or under `gpumem-tui run`",
               pid);
      code = EXIT_REMOTE_OFF;
    } else if (!tstate) {
      snprintf(why, sizeof why, "process %d's main thread has no Python state (yet): try again", pid);
      code = EXIT_OTHER;
    }
  }
  uint64_t support = tstate + w[DBG_REMOTE_SUPPORT];
  if (!code) {
    read_stopped(pid, tstate + w[DBG_TSTATE_NATIVE_THREAD_ID], &main_tid, 8, "thread state");
    read_stopped(pid, tstate + w[DBG_EVAL_BREAKER], &breaker, 8, "thread state");
    read_stopped(pid, support + w[DBG_PENDING_CALL], &pending, 4, "thread state");
    read_stopped(pid, support + w[DBG_SCRIPT_PATH], old_path, path_len, "thread state");
    if (read_failed[0]) {
      snprintf(why, sizeof why, "%s", read_failed);
      code = EXIT_VERSION;
    } else if (pending != 0) {
      snprintf(why, sizeof why, "process %d has a script queued earlier (by attach or a debugger) that has not run yet: it reaches no safe point; try again later", pid);
      code = EXIT_BUSY;
    }
  }
  // The path, then the flag that says it is there, then the bit that makes the loop look: the
  // interpreter reads them in the opposite order. A write that fails puts back what was written.
  if (!code) {
    int32_t one = 1;
    uint64_t stop = breaker | PY_EVAL_PLEASE_STOP_BIT;
    int step = 0;
    if (write_target(pid, support + w[DBG_SCRIPT_PATH], script, path_len) == 0) step = 1;
    if (step == 1 && write_target(pid, support + w[DBG_PENDING_CALL], &one, 4) == 0) step = 2;
    if (step == 2 && write_target(pid, tstate + w[DBG_EVAL_BREAKER], &stop, 8) == 0) step = 3;
    if (step < 3) {
      snprintf(why, sizeof why, "cannot write process %d's thread state: %s", pid, strerror(errno));
      code = EXIT_PTRACE;
      if (step >= 2) write_target(pid, support + w[DBG_PENDING_CALL], &pending, 4);
      if (step >= 1) write_target(pid, support + w[DBG_SCRIPT_PATH], old_path, path_len);
    }
  }
  release_threads(0);
  uint64_t stopped = now_us() - started;
  if (code) die(code, "%s", why);
  printf("queued pid=%d python=%s tid=%llu threads=%d stopped_us=%llu via=pep768 script=%s\n", pid, ver, (unsigned long long)main_tid, n_threads,
         (unsigned long long)stopped, script);
  return 0;
}

#endif
