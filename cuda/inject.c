// gpumem-inject: queue a bootstrap in a running CPython without gdb (docs/protocol.md, "Attaching to
// a running process"). An executable of its own, not part of libgpumem: ptrace wants a tracer whose
// threads and signals are simple, and Bun's are neither.
//
//   gpumem-inject probe PID                 what the target is: python version and the symbols used
//   gpumem-inject inject PID FILE [--timeout-ms N] [--call-tid TID] [--test-stall-ms N]
//                                           3.9–3.13: queue FILE's text (Python source) as a pending call
//                                           (--call-tid and --test-stall-ms are for the tests)
//   gpumem-inject remote-exec PID SCRIPT    3.14+: PEP 768, the interpreter runs the file SCRIPT
//   Each also takes --start-time TICKS: the target's start time (field 22 of /proc/PID/stat) as the
//   monitor last checked it; a pid that has another is refused, status 13, nothing done to it.
//
// remote-exec (PEP 768) makes no call in the target: it finds CPython's _Py_DebugOffsets at the start
// of the runtime (the `.PyRuntime` section), checks them, and writes three fields of the main thread
// state: the script's path, its pending flag, and the eval breaker's "please stop" bit. The writes are
// made with every thread stopped, because the eval breaker is a word the target's threads change
// atomically (signals, GIL requests): a read-modify-write racing them could lose their bit.
//
// How: every thread is seized and interrupted; one of them makes two calls, libc `mmap` (a private
// page: never malloc, whose lock a stopped thread may hold) and `Py_AddPendingCall(PyRun_SimpleString,
// page)`, so the interpreter runs the text itself at its next safe point on the main thread. No code
// byte is written; the return address of each call is 0, so the call ends in a SIGSEGV that is caught
// here and never delivered. Registers, FPU/vector state and the one stack word used are restored, and
// every thread is let go. The last line on stdout says what happened; an error is one line on stderr
// and an exit status (EXIT_* in inject_common.h) that the monitor turns into words.
#define _GNU_SOURCE
#include "inject_common.h"

#if !defined(__x86_64__)
int main(void) {
  die(EXIT_ARCH, "attaching works on x86-64 Linux only");
}
#else

static int probe(int pid) {
  struct target t;
  find_target(pid, &t);
  // The probe holds nothing (it stops no thread), so the process is checked after it was read: a pid
  // that still has the start time asked for was that process throughout (not_asked_for), so what was
  // read is its own; a pid given to another process since fails here.
  char why[512];
  int rc = not_asked_for(pid, why, sizeof why);
  if (rc) die(rc, "%s", why);
  char ver[32];
  print_version(ver, sizeof ver, &t);
  printf("python=%s object=%s pending_call=0x%llx run_simple_string=0x%llx mmap=0x%llx runtime=0x%llx\n", ver, t.python_object, (unsigned long long)t.pending_call,
         (unsigned long long)t.run_simple_string, (unsigned long long)t.libc_mmap, (unsigned long long)t.runtime);
  return 0;
}

static int parse_pid(const char *s) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == 0 || *end || v <= 0 || v > 0x3fffffff) die(EXIT_USAGE, "not a process id: %s", s);
  return (int)v;
}

// --start-time TICKS, which every verb takes: the target's start time as the monitor last checked
// it (field 22 of /proc/PID/stat); the helper then acts only on the process that has it. 0 where
// `opt` is another option.
static int take_start_time(const char *opt, const char *value) {
  if (strcmp(opt, "--start-time") != 0) return 0;
  char *end;
  asked_start = strtoull(value, &end, 10);
  if (*value < '0' || *value > '9' || *end || asked_start == 0) die(EXIT_USAGE, "not a start time: %s", value);
  return 1;
}

// The options after a verb's operands (from argv[from]) for a verb that takes only --start-time.
static void start_time_only(int argc, char **argv, int from) {
  for (int i = from; i < argc; i += 2)
    if (i + 1 >= argc || !take_start_time(argv[i], argv[i + 1])) die(EXIT_USAGE, "unknown option %s", argv[i]);
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "probe") == 0) {
    start_time_only(argc, argv, 3);
    return probe(parse_pid(argv[2]));
  }
  if (argc >= 4 && strcmp(argv[1], "inject") == 0) {
    uint64_t timeout_us = 2000000;
    uint64_t stall_us = 0;
    int call_tid = 0;
    for (int i = 4; i + 1 < argc; i += 2) {
      if (strcmp(argv[i], "--timeout-ms") == 0) timeout_us = (uint64_t)strtoull(argv[i + 1], NULL, 10) * 1000u;
      else if (strcmp(argv[i], "--call-tid") == 0) call_tid = parse_pid(argv[i + 1]);
      else if (strcmp(argv[i], "--test-stall-ms") == 0) stall_us = (uint64_t)strtoull(argv[i + 1], NULL, 10) * 1000u;
      else if (take_start_time(argv[i], argv[i + 1])) continue;
      else die(EXIT_USAGE, "unknown option %s", argv[i]);
    }
    return inject(parse_pid(argv[2]), argv[3], timeout_us, call_tid, stall_us);
  }
  if (argc >= 4 && strcmp(argv[1], "remote-exec") == 0) {
    start_time_only(argc, argv, 4);
    return remote_exec(parse_pid(argv[2]), argv[3]);
  }
  die(EXIT_USAGE, "usage: gpumem-inject probe PID [--start-time TICKS] | inject PID FILE [--timeout-ms N] [--call-tid TID] [--start-time TICKS] [--test-stall-ms N] | remote-exec PID SCRIPT [--start-time TICKS]");
}
#endif
