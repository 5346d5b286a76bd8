// gpumem-inject: queue a bootstrap in a running CPython without gdb (docs/protocol.md, "Attaching to
// a running process"). An executable of its own, not part of libgpumem: ptrace wants a tracer whose
// threads and signals are simple, and Bun's are neither.
//
//   gpumem-inject probe PID                 what the target is: python version and the symbols used
//   gpumem-inject inject PID FILE [--timeout-ms N] [--call-tid TID]
//                                           3.9–3.13: queue FILE's text (Python source) as a pending call
//   gpumem-inject remote-exec PID SCRIPT    3.14+: PEP 768, the interpreter runs the file SCRIPT
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
// and an exit status (see EXIT_* below) that the monitor turns into words.
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
};

__attribute__((noreturn, format(printf, 2, 3))) static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("gpumem-inject: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(code);
}

#if !defined(__x86_64__)
int main(void) {
  die(EXIT_ARCH, "attaching works on x86-64 Linux only");
}
#else

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

// ---- the target's mappings and ELF symbols ----------------------------------------------------

#define MAX_OBJECTS 2048

struct object {
  char path[4096];
  uint64_t base_map;  // start of the mapping at file offset 0
};

static struct object objects[MAX_OBJECTS];
static int n_objects;

static int read_maps(int pid) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/maps", pid);
  FILE *f = fopen(p, "r");
  if (!f) return -1;
  char line[4096 + 256];
  while (fgets(line, sizeof line, f)) {
    unsigned long start, end, off;
    char perms[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms, &off, &path_at) < 4 || path_at == 0) continue;
    char *path = line + path_at;
    path[strcspn(path, "\n")] = 0;
    if (path[0] != '/' || off != 0) continue;
    int seen = 0;
    for (int i = 0; i < n_objects; i++) seen |= strcmp(objects[i].path, path) == 0;
    if (seen || n_objects == MAX_OBJECTS) continue;
    snprintf(objects[n_objects].path, sizeof objects[n_objects].path, "%s", path);
    objects[n_objects++].base_map = start;
  }
  fclose(f);
  return 0;
}

// An ELF file mapped read-only; every offset taken from it is checked against its size.
struct elf {
  const uint8_t *data;
  size_t size;
};

static int in_file(const struct elf *e, uint64_t off, uint64_t len) {
  return off <= e->size && len <= e->size - off;
}

static int elf_open(int pid, const char *path, struct elf *e) {
  // The path as the target sees it (another mount namespace: a container).
  char p[4200];
  snprintf(p, sizeof p, "/proc/%d/root%.4000s", pid, path);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
    close(fd);
    return -1;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return -1;
  e->data = m;
  e->size = (size_t)st.st_size;
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 || h->e_ident[EI_CLASS] != ELFCLASS64 || h->e_machine != EM_X86_64 ||
      h->e_shentsize != sizeof(Elf64_Shdr) || h->e_phentsize != sizeof(Elf64_Phdr) ||
      !in_file(e, h->e_shoff, (uint64_t)h->e_shnum * sizeof(Elf64_Shdr)) || !in_file(e, h->e_phoff, (uint64_t)h->e_phnum * sizeof(Elf64_Phdr))) {
    munmap((void *)e->data, e->size);
    return -1;
  }
  return 0;
}

static void elf_close(struct elf *e) {
  if (e->data) munmap((void *)e->data, e->size);
  e->data = NULL;
}

// The lowest PT_LOAD address, page-aligned: what the mapping at offset 0 corresponds to.
static uint64_t elf_min_vaddr(const struct elf *e) {
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  const Elf64_Phdr *ph = (const Elf64_Phdr *)(e->data + h->e_phoff);
  uint64_t min = UINT64_MAX;
  for (int i = 0; i < h->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < min) min = ph[i].p_vaddr;
  return min == UINT64_MAX ? 0 : min & ~(uint64_t)0xfff;
}

// A defined symbol's link-time value in .dynsym, or 0.
static uint64_t elf_dynsym(const struct elf *e, const char *name, uint64_t *size) {
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->data + h->e_shoff);
  for (int i = 0; i < h->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= h->e_shnum) continue;
    const Elf64_Shdr *str = &sh[sh[i].sh_link];
    if (!in_file(e, sh[i].sh_offset, sh[i].sh_size) || !in_file(e, str->sh_offset, str->sh_size)) return 0;
    const Elf64_Sym *syms = (const Elf64_Sym *)(e->data + sh[i].sh_offset);
    const char *strs = (const char *)(e->data + str->sh_offset);
    size_t n = sh[i].sh_size / sizeof(Elf64_Sym), nlen = strlen(name);
    for (size_t k = 0; k < n; k++) {
      if (syms[k].st_shndx == SHN_UNDEF || syms[k].st_value == 0) continue;
      uint64_t at = syms[k].st_name;
      if (at >= str->sh_size || str->sh_size - at < nlen + 1) continue;
      if (memcmp(strs + at, name, nlen + 1) == 0) {
        if (size) *size = syms[k].st_size;
        return syms[k].st_value;
      }
    }
  }
  return 0;
}

// A section's link-time address, by name (through the section-name string table), or 0.
static uint64_t elf_section(const struct elf *e, const char *name, uint64_t *size) {
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->data + h->e_shoff);
  if (h->e_shstrndx >= h->e_shnum) return 0;
  const Elf64_Shdr *names = &sh[h->e_shstrndx];
  if (!in_file(e, names->sh_offset, names->sh_size)) return 0;
  size_t nlen = strlen(name);
  for (int i = 0; i < h->e_shnum; i++) {
    uint64_t at = sh[i].sh_name;
    if (at >= names->sh_size || names->sh_size - at < nlen + 1) continue;
    if (memcmp(e->data + names->sh_offset + at, name, nlen + 1) == 0 && sh[i].sh_addr) {
      if (size) *size = sh[i].sh_size;
      return sh[i].sh_addr;
    }
  }
  return 0;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static int is_libc(const char *path) {
  const char *b = base_name(path);
  return strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0 || strncmp(b, "ld-musl-", 8) == 0;
}

struct target {
  int pid;
  uint64_t pending_call, run_simple_string, libc_mmap, libc_munmap, py_version_addr;
  uint64_t runtime;  // CPython's _PyRuntime (3.13+: its _Py_DebugOffsets first), or 0
  char python_object[4096];
  int major, minor, micro;
};

static int read_target(int pid, uint64_t addr, void *buf, size_t len) {
  struct iovec local = {buf, len}, remote = {(void *)addr, len};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len) return 0;
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/mem", pid);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t r = pread(fd, buf, len, (off_t)addr);
  close(fd);
  return r == (ssize_t)len ? 0 : -1;
}

static int write_target(int pid, uint64_t addr, const void *buf, size_t len) {
  struct iovec local = {(void *)buf, len}, remote = {(void *)addr, len};
  if (process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len) return 0;
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/mem", pid);
  int fd = open(p, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t r = pwrite(fd, buf, len, (off_t)addr);
  close(fd);
  return r == (ssize_t)len ? 0 : -1;
}

// "python3.10", "libpython3.9.so.1.0": the version in an interpreter's file name, where it says one.
static int version_from_name(const char *path, int *major, int *minor) {
  const char *b = base_name(path);
  const char *p = strstr(b, "python");
  if (!p) return -1;
  return sscanf(p, "python%d.%d", major, minor) == 2 ? 0 : -1;
}

static void find_target(int pid, struct target *t) {
  memset(t, 0, sizeof *t);
  t->pid = pid;
  char p[64];
  snprintf(p, sizeof p, "/proc/%d", pid);
  struct stat st;
  if (stat(p, &st) != 0) die(EXIT_NO_PROCESS, "no process %d", pid);
  if (read_maps(pid) != 0) die(EXIT_PTRACE, "cannot read /proc/%d/maps: %s", pid, strerror(errno));
  if (n_objects == 0) die(EXIT_NOT_PYTHON, "process %d maps no file (a kernel thread?)", pid);
  char exe[4096] = "";
  snprintf(p, sizeof p, "/proc/%d/exe", pid);
  ssize_t n = readlink(p, exe, sizeof exe - 1);
  if (n > 0) exe[n] = 0;
  for (int i = 0; i < n_objects; i++) {
    const char *path = objects[i].path;
    int interp = strcmp(path, exe) == 0 || strstr(base_name(path), "libpython") == base_name(path);
    int libc = is_libc(path);
    if (!interp && !libc) continue;
    struct elf e = {0};
    if (elf_open(pid, path, &e) != 0) continue;
    uint64_t bias = objects[i].base_map - elf_min_vaddr(&e);
    if (interp && !t->pending_call) {
      uint64_t pc = elf_dynsym(&e, "Py_AddPendingCall", NULL), rs = elf_dynsym(&e, "PyRun_SimpleString", NULL);
      if (pc && rs) {
        t->pending_call = bias + pc;
        t->run_simple_string = bias + rs;
        uint64_t v = elf_dynsym(&e, "Py_Version", NULL);
        t->py_version_addr = v ? bias + v : 0;
        // PEP 768's way (Doc/howto/remote_debugging.rst): the `.PyRuntime` section, else the symbol.
        uint64_t rt = elf_section(&e, ".PyRuntime", NULL);
        if (!rt) rt = elf_dynsym(&e, "_PyRuntime", NULL);
        t->runtime = rt ? bias + rt : 0;
        snprintf(t->python_object, sizeof t->python_object, "%.4000s", path);
      }
    }
    if (libc && !t->libc_mmap) {
      uint64_t m = elf_dynsym(&e, "mmap", NULL), u = elf_dynsym(&e, "munmap", NULL);
      if (m && u) {
        t->libc_mmap = bias + m;
        t->libc_munmap = bias + u;
      }
    }
    elf_close(&e);
  }
  if (!t->pending_call) die(EXIT_NOT_PYTHON, "process %d is not a CPython process (no Py_AddPendingCall in its executable or a libpython)", pid);
  if (!t->libc_mmap) die(EXIT_NOT_PYTHON, "process %d: no C library with mmap found among its mappings", pid);
  if (t->py_version_addr) {
    uint32_t hex = 0;
    if (read_target(pid, t->py_version_addr, &hex, sizeof hex) != 0)
      die(EXIT_PTRACE, "cannot read process %d's memory: %s", pid, strerror(errno));
    t->major = (int)(hex >> 24) & 0xff;
    t->minor = (int)(hex >> 16) & 0xff;
    t->micro = (int)(hex >> 8) & 0xff;
  } else if (version_from_name(t->python_object, &t->major, &t->minor) != 0) {
    char real[4096];
    snprintf(p, sizeof p, "/proc/%d/exe", pid);
    if (realpath(p, real) == NULL || version_from_name(real, &t->major, &t->minor) != 0)
      die(EXIT_VERSION, "cannot tell which Python process %d runs (no Py_Version, no version in %s)", pid, t->python_object);
    t->micro = -1;
  } else {
    t->micro = -1;
  }
}

static void print_version(char *out, size_t len, const struct target *t) {
  if (t->micro >= 0) snprintf(out, len, "%d.%d.%d", t->major, t->minor, t->micro);
  else snprintf(out, len, "%d.%d", t->major, t->minor);
}

// ---- the threads ----------------------------------------------------------------------------

#define MAX_THREADS 4096

enum { T_RUNNING, T_STOPPED, T_SIGNAL_STOP, T_GROUP_STOP, T_GONE };

struct thread {
  int tid;
  int state;
  int signal;  // a signal it stopped to receive: given back on detach
};

static struct thread threads[MAX_THREADS];
static int n_threads;
static sigset_t chld_set;

static struct thread *find_thread(int tid) {
  for (int i = 0; i < n_threads; i++)
    if (threads[i].tid == tid) return &threads[i];
  return NULL;
}

// Wait up to `timeout_us` for a state change of `tid`; 1 on a change, 0 on timeout, -1 on error.
static int wait_tid(int tid, int *status, uint64_t timeout_us) {
  uint64_t deadline = now_us() + timeout_us;
  for (;;) {
    int r = waitpid(tid, status, __WALL | WNOHANG);
    if (r == tid) return 1;
    if (r < 0 && errno != EINTR) return -1;
    uint64_t t = now_us();
    if (t >= deadline) return 0;
    uint64_t left = deadline - t;
    if (left > 2000) left = 2000;  // a missed SIGCHLD costs at most 2 ms
    struct timespec ts = {0, (long)left * 1000};
    sigtimedwait(&chld_set, NULL, &ts);
  }
}

// What a stop of a seized thread was: records it on `th`.
static void note_stop(struct thread *th, int status) {
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    th->state = T_GONE;
    return;
  }
  if (!WIFSTOPPED(status)) return;
  int sig = WSTOPSIG(status);
  if ((status >> 16) == PTRACE_EVENT_STOP) {
    th->state = sig == SIGTRAP ? T_STOPPED : T_GROUP_STOP;
  } else {
    th->state = T_SIGNAL_STOP;
    th->signal = sig;
  }
}

static int list_tasks(int pid, int *tids, int max) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/task", pid);
  DIR *d = opendir(p);
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < max) {
    int tid = atoi(de->d_name);
    if (tid > 0) tids[n++] = tid;
  }
  closedir(d);
  return n;
}

static int release_threads(int except_tid) {
  int failed = 0;
  for (int i = 0; i < n_threads; i++) {
    struct thread *th = &threads[i];
    if (th->tid == except_tid || th->state == T_GONE || th->state == T_RUNNING) continue;
    if (ptrace(PTRACE_DETACH, th->tid, 0, (void *)(long)(th->state == T_SIGNAL_STOP ? th->signal : 0)) != 0 && errno != ESRCH) failed++;
    th->state = T_RUNNING;
  }
  return failed;
}

static int process_alive(int pid) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/stat", pid);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  char buf[512];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

// Seize and interrupt every thread, again until no new one appeared (a thread may start one while
// the others are being stopped). Returns 0, or an EXIT_* code after letting every thread go.
static int stop_all(int pid, uint64_t *started_us, char *why, size_t why_len) {
  static int tids[MAX_THREADS];
  *started_us = 0;
  for (int round = 0; round < 100; round++) {
    int n = list_tasks(pid, tids, MAX_THREADS);
    if (n < 0) {
      snprintf(why, why_len, "process %d exited", pid);
      return EXIT_EXITED;
    }
    int added = 0;
    for (int i = 0; i < n; i++) {
      if (find_thread(tids[i])) continue;
      if (n_threads == MAX_THREADS) {
        snprintf(why, why_len, "more than %d threads", MAX_THREADS);
        return EXIT_OTHER;
      }
      if (ptrace(PTRACE_SEIZE, tids[i], 0, 0) != 0) {
        if (errno == ESRCH) continue;  // the thread ended meanwhile
        int e = errno;
        snprintf(why, why_len, "ptrace(PTRACE_SEIZE, %d): %s", tids[i], strerror(e));
        return e == EPERM ? EXIT_PTRACE : EXIT_OTHER;
      }
      if (!*started_us) *started_us = now_us();
      threads[n_threads++] = (struct thread){tids[i], T_RUNNING, 0};
      if (ptrace(PTRACE_INTERRUPT, tids[i], 0, 0) != 0 && errno != ESRCH) {
        snprintf(why, why_len, "ptrace(PTRACE_INTERRUPT, %d): %s", tids[i], strerror(errno));
        return EXIT_OTHER;
      }
      added++;
    }
    for (int i = 0; i < n_threads; i++) {
      struct thread *th = &threads[i];
      if (th->state != T_RUNNING) continue;
      int status;
      int r = wait_tid(th->tid, &status, 1000000);
      if (r == 1) note_stop(th, status);
      else if (r < 0) th->state = T_GONE;  // ECHILD: not ours any more (it exited)
      else {
        snprintf(why, why_len, "thread %d did not stop within 1 s", th->tid);
        return EXIT_OTHER;
      }
    }
    if (!process_alive(pid)) {
      snprintf(why, why_len, "process %d exited during the attach", pid);
      return EXIT_EXITED;
    }
    if (!added) return 0;
  }
  snprintf(why, why_len, "process %d keeps starting threads", pid);
  return EXIT_OTHER;
}

// ---- remote calls in one stopped thread -------------------------------------------------------

struct saved {
  struct user_regs_struct regs;
  uint8_t xstate[16384];
  struct iovec xiov;
  int fp_kind;  // NT_X86_XSTATE or NT_PRFPREG
};

static int save_state(int tid, struct saved *s) {
  if (ptrace(PTRACE_GETREGS, tid, 0, &s->regs) != 0) return -1;
  s->xiov.iov_base = s->xstate;
  s->xiov.iov_len = sizeof s->xstate;
  if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &s->xiov) == 0) {
    s->fp_kind = NT_X86_XSTATE;
    return 0;
  }
  s->xiov.iov_len = sizeof(struct user_fpregs_struct);
  if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRFPREG, &s->xiov) == 0) {
    s->fp_kind = NT_PRFPREG;
    return 0;
  }
  return -1;
}

static int restore_state(int tid, struct saved *s) {
  int r = 0;
  struct iovec iov = s->xiov;  // the size the kernel gave: the same goes back
  if (ptrace(PTRACE_SETREGSET, tid, (void *)(long)s->fp_kind, &iov) != 0) r = -1;
  if (ptrace(PTRACE_SETREGS, tid, 0, &s->regs) != 0) r = -1;
  return r;
}

struct call_ctx {
  int pid;
  struct thread *th;
  struct saved saved;
  uint64_t released_after_us;  // past this long in a call, the other threads are let go
  uint64_t timeout_us;
  uint64_t started_us;
  int others_released;
  int swallowed[64];
  int n_swallowed;
};

enum { CALL_OK, CALL_EXITED, CALL_TIMEOUT, CALL_FAULT, CALL_ERROR };

// fn(args...) in ctx->th; its return value in *ret. The thread is left in the SIGSEGV stop.
static int remote_call(struct call_ctx *c, uint64_t fn, const uint64_t *args, int nargs, uint64_t *ret) {
  int tid = c->th->tid;
  struct user_regs_struct r = c->saved.regs;
  // Below the red zone, 16-byte aligned at the call, then the return address 0 pushed.
  uint64_t sp = ((r.rsp - 128 - 256) & ~(uint64_t)15) - 8;
  errno = 0;
  long old_word = ptrace(PTRACE_PEEKDATA, tid, (void *)sp, 0);
  if (errno) return CALL_ERROR;
  if (ptrace(PTRACE_POKEDATA, tid, (void *)sp, 0) != 0) return CALL_ERROR;
  uint64_t *slots[6] = {(uint64_t *)&r.rdi, (uint64_t *)&r.rsi, (uint64_t *)&r.rdx, (uint64_t *)&r.rcx, (uint64_t *)&r.r8, (uint64_t *)&r.r9};
  for (int i = 0; i < nargs && i < 6; i++) *slots[i] = args[i];
  r.rip = fn;
  r.rsp = sp;
  r.rax = 0;
  r.orig_rax = (uint64_t)-1;  // not in a syscall: the kernel must not restart one over the call
  r.eflags &= ~(uint64_t)0x400;  // DF clear, as the ABI wants at a call
  int result = CALL_ERROR;
  if (ptrace(PTRACE_SETREGS, tid, 0, &r) != 0 || ptrace(PTRACE_CONT, tid, 0, 0) != 0) goto out;
  uint64_t begun = now_us();
  for (;;) {
    uint64_t elapsed = now_us() - begun;
    uint64_t limit = c->others_released ? c->timeout_us : c->released_after_us;
    int status;
    int w = elapsed >= limit ? 0 : wait_tid(tid, &status, limit - elapsed);
    if (w < 0) {
      result = CALL_EXITED;
      goto out;
    }
    if (w == 0) {
      if (!c->others_released) {
        // Something the call needs (a lock) may be held by a stopped thread: let the others run.
        release_threads(tid);
        c->others_released = 1;
        continue;
      }
      // Abandoned: stop the thread where it is; its registers are put back by the caller.
      ptrace(PTRACE_INTERRUPT, tid, 0, 0);
      if (wait_tid(tid, &status, 1000000) == 1 && WIFSTOPPED(status)) {
        if ((status >> 16) == 0 && WSTOPSIG(status) != SIGSEGV && c->n_swallowed < 64) c->swallowed[c->n_swallowed++] = WSTOPSIG(status);
        result = CALL_TIMEOUT;
      } else {
        result = CALL_EXITED;
      }
      goto out;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      c->th->state = T_GONE;
      return CALL_EXITED;
    }
    if (!WIFSTOPPED(status)) continue;
    if ((status >> 16) == PTRACE_EVENT_STOP) {
      ptrace(PTRACE_CONT, tid, 0, 0);
      continue;
    }
    int sig = WSTOPSIG(status);
    if (sig == SIGSEGV) {
      struct user_regs_struct after;
      if (ptrace(PTRACE_GETREGS, tid, 0, &after) != 0) goto out;
      if (after.rip != 0) {
        result = CALL_FAULT;  // a real fault inside the call: never delivered, registers put back
        goto out;
      }
      *ret = after.rax;
      result = CALL_OK;
      goto out;
    }
    // Another signal arrived during the call: kept for after, not run inside it.
    if (c->n_swallowed < 64) c->swallowed[c->n_swallowed++] = sig;
    ptrace(PTRACE_CONT, tid, 0, 0);
  }
out:
  if (result != CALL_EXITED) ptrace(PTRACE_POKEDATA, tid, (void *)sp, (void *)old_word);
  c->th->state = T_SIGNAL_STOP;
  c->th->signal = 0;
  return result;
}

static int pick_call_thread(int pid, int wanted) {
  // Return into address 0 must reach us as a SIGSEGV: not where it is ignored or blocked (the
  // kernel would then reset the handler to make it fatal).
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n_threads; i++) {
      struct thread *th = &threads[i];
      if (th->state != T_STOPPED) continue;
      if (wanted ? th->tid != wanted : (pass == 0 && th->tid != pid)) continue;
      char p[96];
      snprintf(p, sizeof p, "/proc/%d/task/%d/status", pid, th->tid);
      FILE *f = fopen(p, "r");
      if (!f) continue;
      char line[256];
      unsigned long long blk = 0, ign = 0;
      while (fgets(line, sizeof line, f)) {
        sscanf(line, "SigBlk: %llx", &blk);
        sscanf(line, "SigIgn: %llx", &ign);
      }
      fclose(f);
      unsigned long long segv = 1ull << (SIGSEGV - 1);
      if ((blk | ign) & segv) continue;
      return i;
    }
    if (wanted) break;
  }
  return -1;
}

// 18 characters, like "0x" and 16 hex digits (src/attach/bootstrap.ts writes it).
#define PAGE_PLACEHOLDER "__GPUMEM_PAGE_ADDR"

static int inject(int pid, const char *file, uint64_t timeout_us, int call_tid) {
  struct target t;
  find_target(pid, &t);
  char ver[32];
  print_version(ver, sizeof ver, &t);
  if (t.major != 3 || t.minor < 9) die(EXIT_VERSION, "process %d runs Python %s; attaching needs CPython 3.9 or newer", pid, ver);
  if (t.minor >= 14) die(EXIT_USAGE, "process %d runs Python %s: it takes a script file (remote-exec), not a pending call", pid, ver);

  // The text, read before anything stops.
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) die(EXIT_USAGE, "cannot read %s: %s", file, strerror(errno));
  static char text[1 << 20];
  ssize_t len = read(fd, text, sizeof text - 1);
  close(fd);
  if (len <= 0 || len >= (ssize_t)sizeof text - 1) die(EXIT_USAGE, "%s: empty or over 1 MiB", file);
  text[len] = 0;
  size_t page_len = ((size_t)len + 1 + 4095) & ~(size_t)4095;

  sigemptyset(&chld_set);
  sigaddset(&chld_set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld_set, NULL);

  char why[512] = "";
  uint64_t started = 0;
  int rc = stop_all(pid, &started, why, sizeof why);
  if (rc != 0) {
    release_threads(0);
    die(rc, "%s", why);
  }
  int at = pick_call_thread(pid, call_tid);
  if (at < 0) {
    release_threads(0);
    die(EXIT_OTHER, call_tid ? "thread %d cannot make the call (not stopped by us, or it blocks SIGSEGV)" : "no thread of process %d can make the call (all block SIGSEGV or were stopped by a signal); try again", call_tid ? call_tid : pid);
  }
  static struct call_ctx c;
  c.pid = pid;
  c.th = &threads[at];
  c.timeout_us = timeout_us;
  c.released_after_us = 40000;
  if (save_state(c.th->tid, &c.saved) != 0) {
    release_threads(0);
    die(EXIT_OTHER, "cannot read thread %d's registers: %s", c.th->tid, strerror(errno));
  }

  int status = CALL_ERROR;
  uint64_t page = 0, ret = 0;
  const char *failed = "";
  uint64_t margs[6] = {0, page_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0};
  status = remote_call(&c, t.libc_mmap, margs, 6, &ret);
  if (status == CALL_OK && ret > (uint64_t)-4096) {
    failed = "mmap in the target failed";
    status = CALL_ERROR;
  }
  if (status == CALL_OK) {
    page = ret;
    // The text names its own page (the bootstrap unmaps it): the placeholder, same length, filled.
    char *ph = strstr(text, PAGE_PLACEHOLDER);
    if (ph) {
      char addr[sizeof PAGE_PLACEHOLDER];
      snprintf(addr, sizeof addr, "0x%016llx", (unsigned long long)page);
      memcpy(ph, addr, sizeof PAGE_PLACEHOLDER - 1);
    }
    if (write_target(pid, page, text, (size_t)len + 1) != 0) {
      failed = "cannot write the bootstrap into the target";
      status = CALL_ERROR;
    } else {
      uint64_t pargs[2] = {t.run_simple_string, page};
      status = remote_call(&c, t.pending_call, pargs, 2, &ret);
      if (status == CALL_OK && (int)ret != 0) {
        failed = "Py_AddPendingCall refused (its queue is full)";
        status = CALL_ERROR;
      }
    }
    if (status == CALL_ERROR || status == CALL_FAULT) {
      // Not queued: the bootstrap that would unmap the page never runs, so it goes now.
      uint64_t uargs[2] = {page, page_len}, ignored;
      remote_call(&c, t.libc_munmap, uargs, 2, &ignored);
    } else if (status == CALL_TIMEOUT) {
      failed = "one private page stays mapped in it";
    }
  }
  if (status != CALL_EXITED && restore_state(c.th->tid, &c.saved) != 0) failed = "cannot restore the thread's registers";
  ptrace(PTRACE_DETACH, c.th->tid, 0, 0);
  c.th->state = T_RUNNING;
  release_threads(0);
  uint64_t stopped = now_us() - started;
  for (int i = 0; i < c.n_swallowed; i++) syscall(SYS_tgkill, pid, c.th->tid, c.swallowed[i]);

  switch (status) {
    case CALL_OK:
      printf("queued pid=%d python=%s tid=%d threads=%d stopped_us=%llu page=0x%llx page_len=%zu released_early=%d\n", pid, ver, c.th->tid, n_threads,
             (unsigned long long)stopped, (unsigned long long)page, page_len, c.others_released);
      return 0;
    case CALL_EXITED:
      die(EXIT_EXITED, "process %d exited during the attach", pid);
    case CALL_TIMEOUT:
      die(EXIT_CALL_TIMEOUT, "a call in process %d did not return within %llu ms; it was undone (%s)", pid, (unsigned long long)(timeout_us / 1000), failed);
    case CALL_FAULT:
      die(EXIT_OTHER, "a call in process %d faulted; it was undone and nothing was queued", pid);
    default:
      die(EXIT_OTHER, "%s%s", *failed ? failed : "ptrace failed: ", *failed ? "" : strerror(errno));
  }
  return EXIT_OTHER;
}

// ---- CPython 3.14+: PEP 768 ------------------------------------------------------------------

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

static int remote_exec(int pid, const char *script) {
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

  sigemptyset(&chld_set);
  sigaddset(&chld_set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld_set, NULL);
  char why[512] = "";
  uint64_t started = 0;
  int rc = stop_all(pid, &started, why, sizeof why);
  if (rc != 0) {
    release_threads(0);
    die(rc, "%s", why);
  }

  // Stopped: the runtime, interpreter and thread state cannot change under the reads and writes.
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

static int probe(int pid) {
  struct target t;
  find_target(pid, &t);
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

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "probe") == 0) return probe(parse_pid(argv[2]));
  if (argc >= 4 && strcmp(argv[1], "inject") == 0) {
    uint64_t timeout_us = 2000000;
    int call_tid = 0;
    for (int i = 4; i + 1 < argc; i += 2) {
      if (strcmp(argv[i], "--timeout-ms") == 0) timeout_us = (uint64_t)strtoull(argv[i + 1], NULL, 10) * 1000u;
      else if (strcmp(argv[i], "--call-tid") == 0) call_tid = parse_pid(argv[i + 1]);
      else die(EXIT_USAGE, "unknown option %s", argv[i]);
    }
    return inject(parse_pid(argv[2]), argv[3], timeout_us, call_tid);
  }
  if (argc == 4 && strcmp(argv[1], "remote-exec") == 0) return remote_exec(parse_pid(argv[2]), argv[3]);
  die(EXIT_USAGE, "usage: gpumem-inject probe PID | inject PID FILE [--timeout-ms N] [--call-tid TID] | remote-exec PID SCRIPT");
}
#endif
