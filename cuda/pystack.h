/* pystack.h — the Python stack of the thread that allocates, for the blocks that matter.
 *
 * Called from an allocator event (the hook's tracker; the hook double's in tests), under the
 * allocator's lock, on the allocating thread. PyTorch releases the GIL around its ops, so that
 * thread usually does not hold it: nothing here takes the GIL or calls into Python in a way that
 * could run Python code, create an object or collect garbage (a collection frees tensors, which
 * re-enters the allocator), and nothing allocates on the CUDA allocator. What makes the read safe:
 * a thread's interpreter frames change only when that thread runs Python, and it is inside the C
 * call that allocates; the frames hold their code objects, whose strings and line tables never
 * change. So only the calling thread's own frames are read (its thread state from the GIL state's
 * thread-local), as CPython lays them out for the minor version this was compiled against: 3.11,
 * 3.12 and 3.13 from their headers' layouts, 3.14 from the debug offsets the running interpreter
 * publishes at the start of _PyRuntime (the table `attach` reads, cuda/inject_pep768.c); other
 * versions and free-threaded builds: not supported, capture returns 0.
 *
 * Which allocations: sampled by allocated bytes, as heap profilers sample. Every allocation of at
 * least `min_bytes` carries its stack; a smaller one with probability 1 - exp(-size / rate), so that
 * a sampled allocation of size s < min_bytes stands for s / (1 - exp(-size / rate)) bytes and the
 * bytes per line stay unbiased while the number of walks per second is bounded by the allocation
 * rate in bytes / `rate`. The draw is a countdown of bytes per allocating stream (the device: the
 * allocator calls its trackers under its per-device lock, so each countdown has one writer), taken
 * from an exponential of mean `rate` after each sample: an allocation that does not reach the
 * threshold costs one subtraction and a branch (gpumem_pystack_wanted).
 *
 * Which frames: the innermost ones, and where the user's line lies deeper than those, that frame
 * and a few of its callers, with one frame "…" standing for those left out between (so the line a
 * reader names, the first frame that is not library code, is there, and the walk stops there).
 * Library code here is the monitor's rule (src/profiler/user-frame.ts): files under site-packages or
 * dist-packages, the standard library, frozen modules, torch, the agent, and what the user names
 * (gpumem_pystack_rule). Each code object's kind is worked out once (its file's name) and kept in a
 * small table.
 *
 * A stack seen for the first time is turned into text then (file, line, function: the code
 * object's strings and PyCode_Addr2Line, which reads the line table and allocates nothing) and
 * interned under a spin lock (threads of several devices may capture at once). The tables are
 * allocated once, when stacks are enabled; a record carries the id. The interpreter's functions are
 * looked up (dlsym) when stacks are enabled, not linked: the hook names no Python symbol, so it
 * loads in any process.
 *
 * Readers (the agent's sync thread) read ids below the published count only: each stack's text is
 * complete before the count that includes it is stored (release).
 */
#ifndef GPUMEM_PYSTACK_H
#define GPUMEM_PYSTACK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUMEM_PYSTACK_FRAMES 16u       /* frames kept per stack, innermost first */
#define GPUMEM_PYSTACK_CALLERS 3u       /* kept beyond the user's frame, where it lies deeper than the innermost */
#define GPUMEM_PYSTACK_MAX_STACKS 16384u /* distinct stacks interned; later new ones get no id */
#define GPUMEM_PYSTACK_SAMPLERS 64u     /* countdowns, one per allocating stream (device % this) */
#define GPUMEM_PYSTACK_GAP_FILE "\xe2\x80\xa6" /* "…": the file of the frame standing for those left out */

/* 1 where this build knows the running interpreter's frames (the version it was compiled for). */
int gpumem_pystack_supported(void);
/* Capture stacks for allocations of at least `min_bytes` (0: off), and for smaller ones sampled at
 * one per `sample_bytes` allocated (0: none below the threshold). Allocates the tables the first
 * time (never freed: ids stay valid for the process's life) and starts every countdown afresh.
 * 0, -ENOSYS (unsupported: this build or the running interpreter), -ENOMEM. */
int gpumem_pystack_enable(uint64_t min_bytes, uint64_t sample_bytes);
/* What counts as library code beyond the default rule, and what is the user's wherever it lies (the
 * monitor's GPUMEM_TUI_LIBRARY and GPUMEM_TUI_USER_CODE, src/profiler/user-frame.ts): entries
 * separated by '\n', each a path prefix (with a '/') or a dotted module name, as the agent parsed
 * them; NULL or "" for none. Only while stacks are off (-EBUSY otherwise: a walk may be reading
 * them); -E2BIG where they do not fit. 0 on success; the kinds worked out so far are forgotten. */
int gpumem_pystack_rule(const char *library, const char *user);
/* The threshold (0: off) and the sampling's mean bytes (0: none). */
uint64_t gpumem_pystack_min_bytes(void);
uint64_t gpumem_pystack_sample_bytes(void);
/* The calling thread's Python stack as an interned id (1-based); 0 where it has no Python frames
 * (autograd's engine threads), or the table is full. */
uint32_t gpumem_pystack_capture(void);
/* Stacks interned so far (ids 1..count), and how many new ones found the table full. */
uint32_t gpumem_pystack_count(void);
uint64_t gpumem_pystack_dropped(void);
/* Stack `id` as lines "file\tline\tfunction\n", innermost first, into buf (NUL-terminated, cut at
 * len). Bytes written (without the NUL), or -1 for an id not interned. */
int gpumem_pystack_text(uint32_t id, char *buf, int len);

/* A countdown of bytes to the next sample and its generator's state (xorshift64*). */
typedef struct {
  int64_t left;
  uint64_t rng;
} gpumem_pystack_sampler;
/* Hidden: reached from the allocator's path without the shared library's symbol table (no GOT load). */
extern __attribute__((visibility("hidden"))) gpumem_pystack_sampler gpumem_pystack_samplers[GPUMEM_PYSTACK_SAMPLERS];
/* The countdown ran out: the next one drawn; 1 where sampling is on (this allocation is taken). */
__attribute__((visibility("hidden"))) int gpumem_pystack_resample(gpumem_pystack_sampler *s);

/* Whether an allocation of `size` on `stream` (the device) carries its stack, with `min` the
 * threshold as loaded by the caller (non-zero: stacks on). The caller holds the lock that orders the
 * stream's allocations (the allocator's per-device lock); the relaxed loads and stores only keep a
 * concurrent gpumem_pystack_enable from tearing a value. */
static inline int gpumem_pystack_wanted(uint32_t stream, uint64_t size, uint64_t min) {
  if (size >= min) return 1;
  gpumem_pystack_sampler *s = &gpumem_pystack_samplers[stream % GPUMEM_PYSTACK_SAMPLERS];
  const int64_t left = __atomic_load_n(&s->left, __ATOMIC_RELAXED) - (int64_t)size;
  if (__builtin_expect(left >= 0, 1)) {
    __atomic_store_n(&s->left, left, __ATOMIC_RELAXED);
    return 0;
  }
  return gpumem_pystack_resample(s);
}

#ifdef __cplusplus
}
#endif

#endif
