// The target's threads: every one seized and stopped, each let go as it was (cuda/inject_common.h).
#define _GNU_SOURCE
#include "inject_common.h"

#if defined(__x86_64__)

struct thread threads[MAX_THREADS];
int n_threads;
sigset_t chld_set;

static struct thread *find_thread(int tid) {
  for (int i = 0; i < n_threads; i++)
    if (threads[i].tid == tid) return &threads[i];
  return NULL;
}

// Wait up to `timeout_us` for a state change of `tid`; 1 on a change, 0 on timeout, -1 on error.
int wait_tid(int tid, int *status, uint64_t timeout_us) {
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

int release_threads(int except_tid) {
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
  char buf[1024];
  const char *f = stat_fields(pid, buf, sizeof buf);
  return f && *f != 'Z' && *f != 'X';
}

// Seize and interrupt every thread, again until no new one appeared (a thread may start one while
// the others are being stopped), all within STOP_LIMIT_US: the monitor kills a helper that runs past
// its own bounds (src/attach/helper.ts), so every wait here adds up to a known most. Returns 0, or
// an EXIT_* code after letting every thread go.
int stop_all(int pid, uint64_t *started_us, char *why, size_t why_len) {
  static int tids[MAX_THREADS];
  *started_us = 0;
  uint64_t deadline = now_us() + STOP_LIMIT_US;
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
      uint64_t now = now_us();
      int r = now >= deadline ? 0 : wait_tid(th->tid, &status, deadline - now < 1000000 ? deadline - now : 1000000);
      if (r == 1) note_stop(th, status);
      else if (r < 0) th->state = T_GONE;  // ECHILD: not ours any more (it exited)
      else {
        snprintf(why, why_len, "thread %d did not stop within %s", th->tid, now >= deadline ? "the time allowed" : "1 s");
        return EXIT_OTHER;
      }
    }
    if (!process_alive(pid)) {
      snprintf(why, why_len, "process %d exited during the attach", pid);
      return EXIT_EXITED;
    }
    if (!added) return 0;
    if (now_us() >= deadline) break;
  }
  snprintf(why, why_len, "process %d keeps starting threads", pid);
  return EXIT_OTHER;
}

#endif

/* What both ways of injecting do first: SIGCHLD blocked (the stops are waited for with waitpid, not
 * a handler), every thread of pid stopped, or the helper ends with why, every thread let go.
 * Returns when the stop began (us). */
uint64_t stop_all_or_die(int pid, sigset_t *chld_set) {
  sigemptyset(chld_set);
  sigaddset(chld_set, SIGCHLD);
  sigprocmask(SIG_BLOCK, chld_set, NULL);
  char why[512] = "";
  uint64_t started = 0;
  int rc = stop_all(pid, &started, why, sizeof why);
  // Only now is the pid checked to be the process asked for (--start-time), with every thread
  // seized: a check before the seize leaves a window in which the process exits, is reaped, and its
  // pid goes to another process, which this helper would then stop, read and write. From the seize
  // of its main thread (tid = pid) until this helper detaches, the pid cannot go to another process:
  // a seized process can still exit (SIGKILL), but it stays a zombie, its pid and its stat's start
  // time its own, until its tracer has waited for it or let go, and only then can its parent reap
  // it. So the main thread must be among those held and not waited for gone (its seize failing with
  // ESRCH, or its exit reported, means the process was gone), and its start time then says whether
  // what is held is the process asked for; if not, it is let go with nothing done but the stop.
  const struct thread *main_thread = rc == 0 ? find_thread(pid) : NULL;
  if (rc == 0 && (!main_thread || main_thread->state == T_GONE)) {
    snprintf(why, sizeof why, "process %d exited during the attach", pid);
    rc = EXIT_EXITED;
  }
  if (rc == 0) rc = not_asked_for(pid, why, sizeof why);
  if (rc != 0) {
    release_threads(0);
    die(rc, "%s", why);
  }
  return started;
}
