/* pystack.c — see pystack.h. Compiled against the Python headers of the interpreter it runs in
 * (as C for the hook double, as C++ beside hook.cpp); where those headers are missing it is built
 * with GPUMEM_NO_PYTHON_H and captures nothing (supported() is 0). */
#ifndef GPUMEM_NO_PYTHON_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif

#include "pystack.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* 3.11 to 3.13 with the GIL: a free-threaded build (Py_GIL_DISABLED) lays its frames out otherwise. */
#if !defined(GPUMEM_NO_PYTHON_H) && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
#define GPUMEM_PYSTACK_KNOWN 1

/* A bytecode unit, and where a code object's units begin (co_code_adaptive, public in 3.11-3.13,
 * where 3.13 made CPython's own unit type and macro internal). */
typedef uint16_t gpumem_codeunit;
#define CODE_START(co) ((gpumem_codeunit *)(co)->co_code_adaptive)

/* CPython's _PyInterpreterFrame (Include/internal/pycore_frame.h) for this minor version, as far
 * as the fields read here; nothing is ever written. */
typedef struct gpumem_iframe gpumem_iframe;
#if PY_VERSION_HEX < 0x030C0000 /* 3.11 */
struct gpumem_iframe {
  PyObject *f_func;
  PyObject *f_globals;
  PyObject *f_builtins;
  PyObject *f_locals;
  PyCodeObject *f_code;
  PyObject *frame_obj;
  gpumem_iframe *previous;
  gpumem_codeunit *instr; /* prev_instr */
  int stacktop;
  char is_entry;
  char owner;
};
#define FRAME_CODE(f) ((PyObject *)(f)->f_code)
#define CURRENT_FRAME(ts) ((gpumem_iframe *)(ts)->cframe->current_frame)
#else
struct gpumem_iframe {
  PyObject *f_code; /* 3.12: f_code; 3.13: f_executable (a code object, or None) */
  gpumem_iframe *previous;
  PyObject *f_funcobj;
  PyObject *f_globals;
  PyObject *f_builtins;
  PyObject *f_locals;
  PyObject *frame_obj;
  gpumem_codeunit *instr; /* 3.12: prev_instr; 3.13: instr_ptr */
  int stacktop;
  uint16_t return_offset;
  char owner;
};
#define FRAME_CODE(f) ((f)->f_code)
#if PY_VERSION_HEX < 0x030D0000 /* 3.12 */
#define CURRENT_FRAME(ts) ((gpumem_iframe *)(ts)->cframe->current_frame)
#else /* 3.13 */
#define CURRENT_FRAME(ts) ((gpumem_iframe *)(ts)->current_frame)
#endif
#endif
#define OWNED_BY_GENERATOR 1
#define OWNED_BY_CSTACK 3 /* 3.12+: a shim frame the interpreter puts on the C stack */
#define WALK_LIMIT 256    /* frames looked at, at most (a deep recursion is cut, not walked) */
#endif

/* Interned stacks: their frames as (code, byte offset) for the lookup, their text for readers. */
typedef struct {
  uintptr_t code[GPUMEM_PYSTACK_FRAMES];
  int32_t offset[GPUMEM_PYSTACK_FRAMES];
  uint32_t depth;
  uint32_t text_at; /* into g_text */
  uint32_t text_len;
} stack_entry;

#define SLOTS (2u * GPUMEM_PYSTACK_MAX_STACKS) /* open addressing, a power of two */
#define TEXT_BYTES (4u << 20)                  /* frames' text, all stacks together */

static stack_entry *g_stacks; /* [MAX_STACKS]; id k is g_stacks[k - 1]; set once (release) */
static uint32_t *g_slots;     /* id, 0 empty */
static char *g_text;
#ifdef GPUMEM_PYSTACK_KNOWN
static uint32_t g_text_used;
#endif
static uint32_t g_count;    /* published (release) */
static uint64_t g_min;      /* 0: off */
static uint64_t g_dropped;

#ifdef GPUMEM_PYSTACK_KNOWN
/* The interpreter's own symbols, looked up when stacks are enabled instead of linked: a hook that
 * names none of them loads in any process (one whose Python exports no symbols just gets none). */
static PyThreadState *(*p_this_thread_state)(void);
static int (*p_addr2line)(PyCodeObject *, int);
static const void *p_code_type;

static int bind_python(void) {
  p_this_thread_state = (PyThreadState * (*)(void)) dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
  p_addr2line = (int (*)(PyCodeObject *, int))dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
  p_code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  return p_this_thread_state && p_addr2line && p_code_type;
}
#endif

int gpumem_pystack_supported(void) {
#ifdef GPUMEM_PYSTACK_KNOWN
  return 1;
#else
  return 0;
#endif
}

int gpumem_pystack_enable(uint64_t min_bytes) {
  if (!gpumem_pystack_supported()) return -ENOSYS;
#ifdef GPUMEM_PYSTACK_KNOWN
  if (min_bytes && !g_stacks && !bind_python()) return -ENOSYS;
#endif
  if (min_bytes && !g_stacks) {
    stack_entry *s = (stack_entry *)calloc(GPUMEM_PYSTACK_MAX_STACKS, sizeof *s);
    uint32_t *slots = (uint32_t *)calloc(SLOTS, sizeof *slots);
    char *text = (char *)malloc(TEXT_BYTES);
    if (!s || !slots || !text) {
      free(s);
      free(slots);
      free(text);
      return -ENOMEM;
    }
    g_slots = slots;
    g_text = text;
    __atomic_store_n(&g_stacks, s, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&g_min, min_bytes, __ATOMIC_RELAXED);
  return 0;
}

uint64_t gpumem_pystack_min_bytes(void) { return __atomic_load_n(&g_min, __ATOMIC_RELAXED); }
uint32_t gpumem_pystack_count(void) { return __atomic_load_n(&g_count, __ATOMIC_ACQUIRE); }
uint64_t gpumem_pystack_dropped(void) { return __atomic_load_n(&g_dropped, __ATOMIC_RELAXED); }

int gpumem_pystack_text(uint32_t id, char *buf, int len) {
  if (id == 0 || id > gpumem_pystack_count() || len <= 0) return -1;
  const stack_entry *e = &__atomic_load_n(&g_stacks, __ATOMIC_ACQUIRE)[id - 1];
  int n = (int)e->text_len < len - 1 ? (int)e->text_len : len - 1;
  memcpy(buf, g_text + e->text_at, (size_t)n);
  buf[n] = 0;
  return n;
}

#ifdef GPUMEM_PYSTACK_KNOWN

/* A str's characters as UTF-8 into out (at most cap bytes), tabs and newlines as spaces; no Python
 * call that could allocate. A string that is not compact (never a code object's) gives "?". */
static uint32_t put_str(PyObject *s, char *out, uint32_t cap) {
  uint32_t n = 0;
  if (!s || !PyUnicode_Check(s) || !PyUnicode_IS_COMPACT(s)) {
    if (cap) out[n++] = '?';
    return n;
  }
  const int kind = PyUnicode_KIND(s);
  const void *data = PyUnicode_DATA(s);
  const Py_ssize_t len = PyUnicode_GET_LENGTH(s);
  for (Py_ssize_t i = 0; i < len; i++) {
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    if (c == '\t' || c == '\n') c = ' ';
    char b[4];
    uint32_t k;
    if (c < 0x80) b[0] = (char)c, k = 1;
    else if (c < 0x800) b[0] = (char)(0xC0 | (c >> 6)), b[1] = (char)(0x80 | (c & 0x3F)), k = 2;
    else if (c < 0x10000) b[0] = (char)(0xE0 | (c >> 12)), b[1] = (char)(0x80 | ((c >> 6) & 0x3F)), b[2] = (char)(0x80 | (c & 0x3F)), k = 3;
    else b[0] = (char)(0xF0 | (c >> 18)), b[1] = (char)(0x80 | ((c >> 12) & 0x3F)), b[2] = (char)(0x80 | ((c >> 6) & 0x3F)), b[3] = (char)(0x80 | (c & 0x3F)), k = 4;
    if (n + k > cap) break;
    memcpy(out + n, b, k);
    n += k;
  }
  return n;
}

static uint32_t put_dec(long v, char *out, uint32_t cap) {
  char tmp[24];
  int k = 0;
  unsigned long u = v < 0 ? (unsigned long)(-v) : (unsigned long)v;
  do tmp[k++] = (char)('0' + u % 10); while ((u /= 10) && k < 20);
  if (v < 0) tmp[k++] = '-';
  uint32_t n = 0;
  while (k && n < cap) out[n++] = tmp[--k];
  return n;
}

static uint64_t hash_of(const uintptr_t *code, const int32_t *offset, uint32_t depth) {
  uint64_t h = 1469598103934665603ull ^ depth;
  for (uint32_t i = 0; i < depth; i++) {
    h = (h ^ (uint64_t)code[i]) * 1099511628211ull;
    h = (h ^ (uint64_t)(uint32_t)offset[i]) * 1099511628211ull;
  }
  return h ^ (h >> 29);
}

/* The text of a new stack into g_text; false where it does not fit. */
static int write_text(stack_entry *e) {
  char *out = g_text + g_text_used;
  uint32_t cap = TEXT_BYTES - g_text_used, n = 0;
  for (uint32_t i = 0; i < e->depth; i++) {
    PyCodeObject *co = (PyCodeObject *)e->code[i];
    if (cap - n < 64) return 0;
    n += put_str(co->co_filename, out + n, cap - n - 32);
    out[n++] = '\t';
    n += put_dec(p_addr2line(co, e->offset[i]), out + n, 12);
    out[n++] = '\t';
#if PY_VERSION_HEX >= 0x030B0000
    n += put_str(co->co_qualname, out + n, cap - n - 2);
#else
    n += put_str(co->co_name, out + n, cap - n - 2);
#endif
    out[n++] = '\n';
  }
  e->text_at = g_text_used;
  e->text_len = n;
  g_text_used += n;
  return 1;
}

static char g_lock; /* the interning's spin lock: held for a lookup, or a new stack's text */

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

static void lock(void) {
  while (__atomic_test_and_set(&g_lock, __ATOMIC_ACQUIRE))
    while (__atomic_load_n(&g_lock, __ATOMIC_RELAXED)) CPU_RELAX();
}

static void unlock(void) { __atomic_clear(&g_lock, __ATOMIC_RELEASE); }

static uint32_t intern(stack_entry *stacks, const uintptr_t *code, const int32_t *offset, uint32_t depth);

uint32_t gpumem_pystack_capture(void) {
  stack_entry *stacks = __atomic_load_n(&g_stacks, __ATOMIC_ACQUIRE);
  if (!stacks) return 0;
  /* This thread's own state, GIL or not (see pystack.h); none on a thread that never ran Python. */
  PyThreadState *ts = p_this_thread_state();
  if (!ts) return 0;
  uintptr_t code[GPUMEM_PYSTACK_FRAMES];
  int32_t offset[GPUMEM_PYSTACK_FRAMES];
  uint32_t depth = 0;
  int walked = 0;
  for (gpumem_iframe *f = CURRENT_FRAME(ts); f && depth < GPUMEM_PYSTACK_FRAMES && walked < WALK_LIMIT; f = f->previous, walked++) {
    PyObject *c = FRAME_CODE(f);
    if (f->owner == OWNED_BY_CSTACK || !c || (const void *)Py_TYPE(c) != p_code_type) continue;
    PyCodeObject *co = (PyCodeObject *)c;
    gpumem_codeunit *first = CODE_START(co);
    /* A frame just pushed, before its first traceable instruction, has no line yet. */
    if (f->owner != OWNED_BY_GENERATOR && f->instr < first + co->_co_firsttraceable) continue;
    code[depth] = (uintptr_t)co;
    offset[depth] = (int32_t)((char *)f->instr - (char *)first);
    depth++;
  }
  if (depth == 0) return 0;
  lock();
  const uint32_t id = intern(stacks, code, offset, depth);
  unlock();
  return id;
}

/* The id of a stack, interning it where it is new; under the lock. Readers of the text look below
 * g_count only. */
static uint32_t intern(stack_entry *stacks, const uintptr_t *code, const int32_t *offset, uint32_t depth) {
  const uint64_t h = hash_of(code, offset, depth);
  for (uint32_t probe = 0; probe < SLOTS; probe++) {
    uint32_t *slot = &g_slots[(h + probe) & (SLOTS - 1)];
    uint32_t id = *slot;
    if (id == 0) {
      uint32_t n = g_count;
      if (n >= GPUMEM_PYSTACK_MAX_STACKS) break;
      stack_entry *e = &stacks[n];
      memcpy(e->code, code, depth * sizeof code[0]);
      memcpy(e->offset, offset, depth * sizeof offset[0]);
      e->depth = depth;
      if (!write_text(e)) break;
      *slot = n + 1;
      __atomic_store_n(&g_count, n + 1, __ATOMIC_RELEASE);
      return n + 1;
    }
    const stack_entry *e = &stacks[id - 1];
    if (e->depth == depth && !memcmp(e->code, code, depth * sizeof code[0]) && !memcmp(e->offset, offset, depth * sizeof offset[0])) return id;
  }
  __atomic_add_fetch(&g_dropped, 1, __ATOMIC_RELAXED);
  return 0;
}

#else

uint32_t gpumem_pystack_capture(void) { return 0; }

#endif
