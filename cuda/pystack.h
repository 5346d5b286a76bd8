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
 * thread-local), as CPython lays them out for the minor version this was compiled against (3.11,
 * 3.12, 3.13; other versions: not supported, capture returns 0). A stack seen for the first time
 * is turned into text then (file, line, function: the code object's strings and PyCode_Addr2Line,
 * which reads the line table and allocates nothing) and interned under a spin lock (threads of
 * several devices may capture at once). The tables are allocated once, when stacks are enabled; a
 * record carries the id. The interpreter's functions are looked up (dlsym) when stacks are enabled,
 * not linked: the hook names no Python symbol, so it loads in any process.
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
#define GPUMEM_PYSTACK_MAX_STACKS 16384u /* distinct stacks interned; later new ones get no id */

/* 1 where this build knows the running interpreter's frames (the version it was compiled for). */
int gpumem_pystack_supported(void);
/* Capture stacks for allocations of at least `min_bytes` (0: off). Allocates the tables the first
 * time (never freed: ids stay valid for the process's life). 0, -ENOSYS (unsupported), -ENOMEM. */
int gpumem_pystack_enable(uint64_t min_bytes);
/* The threshold (0: off). */
uint64_t gpumem_pystack_min_bytes(void);
/* The calling thread's Python stack as an interned id (1-based); 0 where it has no Python frames
 * (autograd's engine threads), or the table is full. */
uint32_t gpumem_pystack_capture(void);
/* Stacks interned so far (ids 1..count), and how many new ones found the table full. */
uint32_t gpumem_pystack_count(void);
uint64_t gpumem_pystack_dropped(void);
/* Stack `id` as lines "file\tline\tfunction\n", innermost first, into buf (NUL-terminated, cut at
 * len). Bytes written (without the NUL), or -1 for an id not interned. */
int gpumem_pystack_text(uint32_t id, char *buf, int len);

#ifdef __cplusplus
}
#endif

#endif
