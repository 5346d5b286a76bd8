// CPython 3.9-3.13: a pending call queued by two remote calls in one stopped thread (cuda/inject_common.h).
#define _GNU_SOURCE
#include "inject_common.h"

#if defined(__x86_64__)

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

int inject(int pid, const char *file, uint64_t timeout_us, int call_tid, uint64_t stall_us) {
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

  uint64_t started = stop_all_or_die(pid, &chld_set);
  // Test-only (--test-stall-ms): a helper that stalls holding every thread stopped, before any call,
  // as one blocked by something unforeseen would; the monitor must kill it and the target go on.
  if (stall_us) {
    if (stall_us > 10000000) stall_us = 10000000;
    struct timespec ts = {(time_t)(stall_us / 1000000), (long)(stall_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
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

#endif
