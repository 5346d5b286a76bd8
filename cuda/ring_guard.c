/*
 * ring_guard.c — reads of a live ring that a cut file cannot kill (layout: gpumem_ring.h).
 *
 * A mapping a live ring's writer (or anyone with its file) may cut short: a read past the file's
 * new end raises SIGBUS. Reads of such a mapping run guarded (GUARD_BEGIN in ring_reader.h): the
 * handler jumps back to the read, which then fails (GPUMEM_RING_E_TRUNCATED). A SIGBUS anywhere
 * else goes to the handler that was there before. Recordings are private copies and need none of
 * this. The header copy, the simplest guarded read, lives here too.
 */
#define _GNU_SOURCE
#include "ring_reader.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

/* volatile: only the handler reads them, so between a guard's begin and end (a memcpy the compiler
 * inlines) it sees no read, and dropped the store that arms the guard as dead (a header copy of a
 * cut ring then died of SIGBUS). */
static __thread sigjmp_buf *volatile guard_jmp;
static __thread const char *volatile guard_lo, *volatile guard_hi;
static struct sigaction prev_bus;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void on_bus(int sig, siginfo_t *si, void *uc) {
  const char *a = (const char *)si->si_addr;
  if (guard_jmp && a >= guard_lo && a < guard_hi) siglongjmp(*guard_jmp, 1);
  if (prev_bus.sa_flags & SA_SIGINFO) {
    prev_bus.sa_sigaction(sig, si, uc);
  } else if (prev_bus.sa_handler == SIG_DFL) {
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
  } else if (prev_bus.sa_handler != SIG_IGN) {
    prev_bus.sa_handler(sig);
  }
}

static void install_guard(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_bus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK; /* NODEFER: the jump leaves SIGBUS unblocked */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &prev_bus);
}

void gpumem_guard_install(void) { pthread_once(&guard_once, install_guard); }

void gpumem_guard_arm(sigjmp_buf *env, const void *lo, size_t len) {
  /* The range first: the handler jumps only once guard_jmp is set, and by then the range is. */
  guard_lo = (const char *)lo;
  guard_hi = guard_lo + len;
  guard_jmp = env;
}

void gpumem_guard_disarm(void) { guard_jmp = NULL; }

int gpumem_ring_header_copy(gpumem_reader *r, void *dst) {
  GUARD_BEGIN(r, GPUMEM_RING_E_TRUNCATED);
  memcpy(dst, r->h, GPUMEM_HEADER_SIZE);
  GUARD_END();
  return 0;
}
