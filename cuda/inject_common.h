// The attach helper's parts (cuda/inject.c has main and what the helper does; see there): the
// target's symbols (inject_target.c), its threads (inject_threads.c), a pending call made in one
// stopped thread (inject_call.c), and PEP 768 on CPython 3.14+ (inject_pep768.c). x86-64 Linux only.
#ifndef GPUMEM_INJECT_COMMON_H
#define GPUMEM_INJECT_COMMON_H
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <sys/user.h>
#endif

enum {
  EXIT_OTHER = 1,
  EXIT_USAGE = 2,
  EXIT_NO_PROCESS = 3,
  EXIT_NOT_PYTHON = 4,
  EXIT_VERSION = 5,
  EXIT_PTRACE = 6,
  EXIT_EXITED = 7,
  EXIT_CALL_TIMEOUT = 8,
  EXIT_ARCH = 9,
  EXIT_REMOTE_OFF = 10,  // 3.14+: remote debugging disabled in the target
  EXIT_BUSY = 11,        // 3.14+: a script queued earlier has not run yet
  EXIT_UNREADABLE = 12,  // the interpreter's or C library's file cannot be read safely (cuda/inject_target.c open_mapped)
  EXIT_NOT_SAME = 13,    // the pid is not the process asked for any more (--start-time; inject_target.c not_asked_for)
};

// An error: one line on stderr, and the exit status that says which (the monitor's words for it:
// src/attach/helper.ts HELPER_EXIT).
__attribute__((noreturn, format(printf, 2, 3))) static inline void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("gpumem-inject: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(code);
}

#if defined(__x86_64__)
static inline uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

// The process attached to: where its interpreter keeps what the helper calls or writes.
struct target {
  int pid;
  uint64_t pending_call, run_simple_string, libc_mmap, libc_munmap, py_version_addr;
  uint64_t runtime;  // CPython's _PyRuntime (3.13+: its _Py_DebugOffsets first), or 0
  char python_object[4096];
  int major, minor, micro;
};

// The process asked for, by its start time (field 22 of /proc/PID/stat, clock ticks after boot) as
// the monitor last checked it: --start-time TICKS. 0 where none was given: nothing is checked.
extern unsigned long long asked_start;
const char *stat_fields(int pid, char *buf, size_t len);
int not_asked_for(int pid, char *why, size_t why_len);

void find_target(int pid, struct target *t);
void print_version(char *out, size_t len, const struct target *t);
int read_target(int pid, uint64_t addr, void *buf, size_t len);
int write_target(int pid, uint64_t addr, const void *buf, size_t len);

#define MAX_THREADS 4096
#define STOP_LIMIT_US 3000000  // stopping every thread, at most (inject_threads.c stop_all)

enum { T_RUNNING, T_STOPPED, T_SIGNAL_STOP, T_GROUP_STOP, T_GONE };

struct thread {
  int tid;
  int state;
  int signal;  // a signal it stopped to receive: given back on detach
};

extern struct thread threads[MAX_THREADS];
extern int n_threads;
extern sigset_t chld_set;

int wait_tid(int tid, int *status, uint64_t timeout_us);
int stop_all(int pid, uint64_t *started_us, char *why, size_t why_len);
uint64_t stop_all_or_die(int pid, sigset_t *chld_set);
int release_threads(int except_tid);

int inject(int pid, const char *file, uint64_t timeout_us, int call_tid, uint64_t stall_us);
int remote_exec(int pid, const char *script);
#endif
#endif
