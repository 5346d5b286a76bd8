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
#include <time.h>

/* 3.11 to 3.14 with the GIL: a free-threaded build (Py_GIL_DISABLED) lays its frames out otherwise. */
#if !defined(GPUMEM_NO_PYTHON_H) && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030F0000 && !defined(Py_GIL_DISABLED)
#define GPUMEM_PYSTACK_KNOWN 1

#if PY_VERSION_HEX >= 0x030E0000 || (defined(GPUMEM_PYSTACK_OFFSETS_CHECK) && PY_VERSION_HEX >= 0x030D0000)
/* 3.14: the frame and code layouts from the running interpreter's _Py_DebugOffsets (the table PEP 768
 * debuggers and `attach` read), whose own layout holds within a minor version. The headers' structs
 * are internal from 3.14 on. 3.13 publishes the table too (its own layout, below): built with
 * GPUMEM_PYSTACK_OFFSETS_CHECK against 3.13's headers, this path runs on a 3.13 interpreter, so that
 * the walk by offsets is tested where no 3.14 is at hand (test/agent/stacks.test.ts). */
#define GPUMEM_PYSTACK_OFFSETS 1
#define DBG_COOKIE "xdebugpy"
/* Where each field used lies in the table: its index among the uint64_t words after the 8-byte
 * cookie (Include/internal/pycore_debug_offsets.h for 3.14, as inject_pep768.c counts them;
 * pycore_runtime.h for 3.13). Word 0 is the version (PY_VERSION_HEX), word 1 free_threaded. */
static const struct dbg_layout {
  uint32_t minor, tstate_size, tstate_frame, frame_size, frame_previous, frame_executable, frame_instr, frame_owner, code_size, code_filename,
      code_qualname, code_adaptive;
} DBG_LAYOUTS[] = {
    {13, 18, 22, 27, 28, 29, 30, 32, 33, 34, 36, 42},
    {14, 21, 25, 30, 31, 32, 33, 35, 38, 39, 41, 47},
};
#define DBG_WORDS 48 /* enough for every index above */
static struct {
  size_t ts_frame, f_previous, f_executable, f_instr, f_owner, co_filename, co_qualname, co_code;
} g_off;
#define AT(p, off, T) (*(T const *)((const char *)(p) + (off)))
typedef void gpumem_iframe;
#define CURRENT_FRAME(ts) AT(ts, g_off.ts_frame, gpumem_iframe *)
#define FRAME_PREVIOUS(f) AT(f, g_off.f_previous, gpumem_iframe *)
/* f_executable is a _PyStackRef: the object's address with tag bits in the low two. */
#define FRAME_CODE(f) ((PyObject *)(AT(f, g_off.f_executable, uintptr_t) & ~(uintptr_t)3))
#define FRAME_INSTR(f) AT(f, g_off.f_instr, const char *)
#define FRAME_OWNER(f) AT(f, g_off.f_owner, char)
#define CODE_START(co) ((const char *)(co) + g_off.co_code)
#define CODE_FILENAME(co) AT(co, g_off.co_filename, PyObject *)
#define CODE_QUALNAME(co) AT(co, g_off.co_qualname, PyObject *)
#define NOT_STARTED(f, co) 0 /* instr_ptr is the instruction executing or about to: never before the code */
#define OWNED_BY_INTERPRETER 3 /* 3 and above: the interpreter's own base and entry frames */
#define SHIM(f) (FRAME_OWNER(f) >= OWNED_BY_INTERPRETER)

#else
/* A bytecode unit, and where a code object's units begin (co_code_adaptive, public in 3.11-3.13,
 * where 3.13 made CPython's own unit type and macro internal). */
typedef uint16_t gpumem_codeunit;

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
#define FRAME_PREVIOUS(f) ((f)->previous)
#define FRAME_INSTR(f) ((const char *)(f)->instr)
#define CODE_START(co) ((const char *)(co)->co_code_adaptive)
#define CODE_FILENAME(co) ((co)->co_filename)
#define CODE_QUALNAME(co) ((co)->co_qualname)
#define OWNED_BY_GENERATOR 1
#define OWNED_BY_CSTACK 3 /* 3.12+: a shim frame the interpreter puts on the C stack */
#define SHIM(f) ((f)->owner == OWNED_BY_CSTACK)
/* A frame just pushed, before its first traceable instruction, has no line yet. */
#define NOT_STARTED(f, co) ((f)->owner != OWNED_BY_GENERATOR && FRAME_INSTR(f) < CODE_START(co) + 2 * (co)->_co_firsttraceable)
#endif
#define WALK_LIMIT 256 /* frames looked at, at most (a deep recursion is cut, not walked) */
#endif

/* Interned stacks: their frames as (code, byte offset) for the lookup, their text for readers. A
 * frame whose code is 0 stands for `offset` frames left out between the innermost and the user's. */
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
static uint64_t g_rate;     /* the sampling's mean bytes; 0: none below g_min */
static uint64_t g_dropped;

gpumem_pystack_sampler gpumem_pystack_samplers[GPUMEM_PYSTACK_SAMPLERS];

/* --- sampling by bytes ------------------------------------------------------------------------ */

static uint64_t next_random(gpumem_pystack_sampler *s) {
  uint64_t x = __atomic_load_n(&s->rng, __ATOMIC_RELAXED);
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  __atomic_store_n(&s->rng, x, __ATOMIC_RELAXED);
  return x * 2685821657736338717ull;
}

/* -ln(u) for u in (0, 1], without libm (the hook double and benchmarks are built without it): u =
 * m * 2^e with m in [1, 2), ln m = 2 atanh((m - 1) / (m + 1)), whose series in z <= 1/3 is exact to
 * about 1e-10 after the terms below: far below what a sample's weight needs. */
static double neg_log(double u) {
  union {
    double d;
    uint64_t b;
  } v = {u};
  const int e = (int)((v.b >> 52) & 0x7ff) - 1023;
  v.b = (v.b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  const double z = (v.d - 1.0) / (v.d + 1.0), z2 = z * z;
  const double ln_m = 2.0 * z * (1.0 + z2 * (1.0 / 3 + z2 * (1.0 / 5 + z2 * (1.0 / 7 + z2 * (1.0 / 9 + z2 * (1.0 / 11 + z2 * (1.0 / 13 + z2 * (1.0 / 15 + z2 / 17))))))));
  return -(e * 0.6931471805599453 + ln_m);
}

/* Bytes to the next sample: an exponential of mean `rate`. */
static int64_t draw(gpumem_pystack_sampler *s, uint64_t rate) {
  const double u = (double)((next_random(s) >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
  const double b = neg_log(u) * (double)rate;
  return b >= 9.0e18 ? INT64_MAX : (int64_t)b;
}

int gpumem_pystack_resample(gpumem_pystack_sampler *s) {
  const uint64_t rate = __atomic_load_n(&g_rate, __ATOMIC_RELAXED);
  __atomic_store_n(&s->left, rate ? draw(s, rate) : INT64_MAX, __ATOMIC_RELAXED);
  return rate != 0;
}

/* Every countdown afresh, each generator from its own seed (the clock and its index). */
static void reset_samplers(uint64_t rate) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  for (uint32_t i = 0; i < GPUMEM_PYSTACK_SAMPLERS; i++) {
    gpumem_pystack_sampler *s = &gpumem_pystack_samplers[i];
    uint64_t z = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) + (i + 1) * 0x9E3779B97F4A7C15ull; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    __atomic_store_n(&s->rng, z ? z : 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->left, rate ? draw(s, rate) : INT64_MAX, __ATOMIC_RELAXED);
  }
}

#ifdef GPUMEM_PYSTACK_KNOWN
/* The interpreter's own symbols, looked up when stacks are enabled instead of linked: a hook that
 * names none of them loads in any process (one whose Python exports no symbols just gets none). */
static PyThreadState *(*p_this_thread_state)(void);
static int (*p_addr2line)(PyCodeObject *, int);
static const void *p_code_type;

#ifdef GPUMEM_PYSTACK_OFFSETS
/* The running interpreter's debug offsets: the table of the minor version this was compiled for
 * (the headers' string and object macros are that version's), with the GIL, every offset used
 * inside the structure it belongs to. 1 where they are usable. */
static int bind_offsets(void) {
  const char *rt = (const char *)dlsym(RTLD_DEFAULT, "_PyRuntime");
  if (!rt || memcmp(rt, DBG_COOKIE, 8) != 0) return 0;
  uint64_t w[DBG_WORDS];
  memcpy(w, rt + 8, sizeof w);
  const uint32_t minor = (uint32_t)((w[0] >> 16) & 0xff);
  if (((w[0] >> 24) & 0xff) != 3 || minor != ((PY_VERSION_HEX >> 16) & 0xff) || w[1] != 0) return 0;
  const struct dbg_layout *l = NULL;
  for (size_t i = 0; i < sizeof DBG_LAYOUTS / sizeof DBG_LAYOUTS[0]; i++)
    if (DBG_LAYOUTS[i].minor == minor) l = &DBG_LAYOUTS[i];
  if (!l) return 0;
  const uint64_t ts = w[l->tstate_size], fs = w[l->frame_size], cs = w[l->code_size];
  if (ts > (1u << 20) || fs > 4096 || cs > 4096) return 0;
  if (w[l->tstate_frame] + 8 > ts) return 0;
  if (w[l->frame_previous] + 8 > fs || w[l->frame_executable] + 8 > fs || w[l->frame_instr] + 8 > fs || w[l->frame_owner] + 1 > fs) return 0;
  if (w[l->code_filename] + 8 > cs || w[l->code_qualname] + 8 > cs || w[l->code_adaptive] > cs) return 0;
  g_off.ts_frame = w[l->tstate_frame];
  g_off.f_previous = w[l->frame_previous];
  g_off.f_executable = w[l->frame_executable];
  g_off.f_instr = w[l->frame_instr];
  g_off.f_owner = w[l->frame_owner];
  g_off.co_filename = w[l->code_filename];
  g_off.co_qualname = w[l->code_qualname];
  g_off.co_code = w[l->code_adaptive];
  return 1;
}
#endif

static int bind_python(void) {
  p_this_thread_state = (PyThreadState * (*)(void)) dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
  p_addr2line = (int (*)(PyCodeObject *, int))dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
  p_code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
#ifdef GPUMEM_PYSTACK_OFFSETS
  if (!bind_offsets()) return 0;
#endif
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

int gpumem_pystack_enable(uint64_t min_bytes, uint64_t sample_bytes) {
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
  const uint64_t rate = min_bytes ? sample_bytes : 0;
  __atomic_store_n(&g_rate, rate, __ATOMIC_RELAXED);
  reset_samplers(rate);
  __atomic_store_n(&g_min, min_bytes, __ATOMIC_RELAXED);
  return 0;
}

uint64_t gpumem_pystack_min_bytes(void) { return __atomic_load_n(&g_min, __ATOMIC_RELAXED); }
uint64_t gpumem_pystack_sample_bytes(void) { return __atomic_load_n(&g_rate, __ATOMIC_RELAXED); }
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

static uint32_t put_lit(const char *s, char *out, uint32_t cap) {
  uint32_t n = 0;
  while (s[n] && n < cap) out[n] = s[n], n++;
  return n;
}

/* --- which code is the user's --------------------------------------------------------------- */

/* Whether `p` (NUL-terminated) has "/lib/python3" or "/lib64/python3", its minor and an ABI letter
 * or two, then "/": the standard library's directory. */
static int stdlib_dir(const char *p) {
  for (const char *q = p; (q = strstr(q, "/lib")) != NULL; q++) {
    const char *r = q + 4;
    if (r[0] == '6' && r[1] == '4') r += 2;
    if (strncmp(r, "/python", 7) != 0) continue;
    r += 7;
    if (*r < '0' || *r > '9') continue;
    while ((*r >= '0' && *r <= '9') || *r == '.') r++;
    if (*r >= 'a' && *r <= 'z') r++;
    if (*r == '/') return 1;
  }
  return 0;
}

/* torch's own packages where torch runs from a source checkout (its path has no site-packages). */
static const char *const TORCH_PARTS[] = {"nn", "autograd", "optim", "utils", "cuda", "distributed", "amp", "fx", "profiler", "jit", "functional", "overrides",
                                          "serialization", "storage", "random", "export", "onnx", "library", "backends", "sparse", "special", "linalg", "fft",
                                          "masked", "nested", "ao", "testing", "multiprocessing", "func", "__init__", NULL};

static int torch_file(const char *p) {
  for (const char *q = p; (q = strstr(q, "torch/")) != NULL; q++) {
    if (q != p && q[-1] != '/') continue;
    const char *r = q + 6;
    if (r[0] == '_' && r[1] >= 'a' && r[1] <= 'z') return 1; /* torch/_dynamo, torch/_tensor.py … */
    for (const char *const *t = TORCH_PARTS; *t; t++) {
      const size_t k = strlen(*t);
      if (strncmp(r, *t, k) == 0 && (r[k] == '/' || r[k] == '.')) return 1;
    }
  }
  return 0;
}

/* The user's entries: each NUL-terminated, the list ended by an empty one. */
#define RULE_BYTES 4096
static char g_rule_library[RULE_BYTES], g_rule_user[RULE_BYTES];

/* Whether `p` (a file's name) lies under `entry`: a path prefix, or a module as a directory or a
 * file (user-frame.ts under()). */
static int under(const char *p, const char *entry) {
  if (strchr(entry, '/')) return strncmp(p, entry, strlen(entry)) == 0;
  char path[256];
  size_t k = 0;
  for (; entry[k] && k < sizeof path - 4; k++) path[k] = entry[k] == '.' ? '/' : entry[k];
  path[k] = 0;
  const size_t n = strlen(p);
  for (const char *q = p; (q = strstr(q, path)) != NULL; q++) {
    const int starts = q == p || q[-1] == '/';
    if (!starts) continue;
    if (q[k] == '/' ) return 1;                                        /* /path/… or path/… */
    if (strcmp(q + k, ".py") == 0 && q + k + 3 == p + n) return 1;       /* …/path.py or path.py */
  }
  return 0;
}

static int under_any(const char *p, const char *list) {
  for (const char *e = list; *e; e += strlen(e) + 1)
    if (under(p, e)) return 1;
  return 0;
}

/* The monitor's rule (src/profiler/user-frame.ts frameKind): 1 for the user's code; 0 for
 * library code (installed packages, the standard library, frozen modules, torch, the monitor's
 * agent) and native or
 * unknown files. A name too long for the buffer is taken as the user's (the walk stops there). */
static int user_file(PyObject *filename) {
  char p[512];
  const uint32_t n = put_str(filename, p, sizeof p - 1);
  p[n] = 0;
  if (n == 0) return 0;
  if (p[0] != '<') {
    const int py = (n >= 3 && strcmp(p + n - 3, ".py") == 0) || (n >= 4 && strcmp(p + n - 4, ".pyw") == 0);
    if (!py && n < sizeof p - 1) return 0; /* native: never a user's line */
  }
  if (under_any(p, g_rule_user)) return 1;
  if (under_any(p, g_rule_library) || strncmp(p, "<frozen ", 8) == 0) return 0;
  if (strstr(p, "/site-packages/") || strstr(p, "/dist-packages/") || stdlib_dir(p) || strstr(p, "/Lib/") || strncmp(p, "Lib/", 4) == 0) return 0;
  if (strstr(p, "/gpumem_agent/") || strncmp(p, "gpumem_agent/", 13) == 0) return 0; /* the monitor's own agent */
  return !torch_file(p);
}

/* Each code object's kind, worked out once: code | 1 (known) | 2 (the user's). Direct-mapped; a
 * code object freed and another made at its address may be taken for the first (which frames are
 * kept, nothing more). Relaxed word stores: threads of several devices may look at once. */
#define KIND_SLOTS 4096u
static uintptr_t g_kind[KIND_SLOTS];

static int user_code(PyCodeObject *co) {
  const uintptr_t key = (uintptr_t)co;
  uintptr_t *slot = &g_kind[(uint32_t)(((uint64_t)(key >> 4) * 0x9E3779B97F4A7C15ull) >> 52) & (KIND_SLOTS - 1)];
  const uintptr_t v = __atomic_load_n(slot, __ATOMIC_RELAXED);
  if ((v & ~(uintptr_t)3) == key && (v & 1)) return (int)(v >> 1) & 1;
  const int user = user_file(CODE_FILENAME(co));
  __atomic_store_n(slot, key | 1 | (user ? 2 : 0), __ATOMIC_RELAXED);
  return user;
}

/* `text` ('\n'-separated) into `out` as NUL-terminated entries ended by an empty one. */
static int put_rule(char *out, const char *text) {
  size_t n = 0;
  for (const char *t = text ? text : ""; *t;) {
    const char *end = strchr(t, '\n');
    const size_t k = end ? (size_t)(end - t) : strlen(t);
    if (k) {
      if (n + k + 2 > RULE_BYTES) return -E2BIG;
      memcpy(out + n, t, k);
      out[n + k] = 0;
      n += k + 1;
    }
    t += k + (end ? 1 : 0);
  }
  out[n] = 0;
  return 0;
}

int gpumem_pystack_rule(const char *library, const char *user) {
  if (__atomic_load_n(&g_min, __ATOMIC_RELAXED) != 0) return -EBUSY;
  char lib[RULE_BYTES], usr[RULE_BYTES];
  int rc = put_rule(lib, library);
  if (rc == 0) rc = put_rule(usr, user);
  if (rc != 0) return rc;
  memcpy(g_rule_library, lib, RULE_BYTES);
  memcpy(g_rule_user, usr, RULE_BYTES);
  memset(g_kind, 0, sizeof g_kind);
  return 0;
}

/* --- interning ------------------------------------------------------------------------------ */

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
    if (!co) { /* the frames left out */
      n += put_lit(GPUMEM_PYSTACK_GAP_FILE "\t0\t", out + n, 16);
      n += put_dec(e->offset[i], out + n, 12);
      n += put_lit(" frames left out\n", out + n, 20);
      continue;
    }
    n += put_str(CODE_FILENAME(co), out + n, cap - n - 32);
    out[n++] = '\t';
    n += put_dec(p_addr2line(co, e->offset[i]), out + n, 12);
    out[n++] = '\t';
    n += put_str(CODE_QUALNAME(co), out + n, cap - n - 2);
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

/* Frames kept before the user's where it lies deeper than GPUMEM_PYSTACK_FRAMES: the rest holds the
 * gap, the user's frame and its callers. */
#define INNER (GPUMEM_PYSTACK_FRAMES - 2 - GPUMEM_PYSTACK_CALLERS)

uint32_t gpumem_pystack_capture(void) {
  stack_entry *stacks = __atomic_load_n(&g_stacks, __ATOMIC_ACQUIRE);
  if (!stacks) return 0;
  /* This thread's own state, GIL or not (see pystack.h); none on a thread that never ran Python. */
  PyThreadState *ts = p_this_thread_state();
  if (!ts) return 0;
  uintptr_t code[GPUMEM_PYSTACK_FRAMES];
  int32_t offset[GPUMEM_PYSTACK_FRAMES];
  uint32_t depth = 0, seen = 0;
  /* user: a frame of the user's code is among the innermost, or (beyond) was found deeper */
  int user = 0, beyond = 0;
  int walked = 0;
  for (const gpumem_iframe *f = CURRENT_FRAME(ts); f && walked < WALK_LIMIT; f = FRAME_PREVIOUS(f), walked++) {
    PyObject *c = FRAME_CODE(f);
    if (SHIM(f) || !c || (const void *)Py_TYPE(c) != p_code_type) continue;
    PyCodeObject *co = (PyCodeObject *)c;
    if (NOT_STARTED(f, co)) continue;
    const int32_t off = (int32_t)(FRAME_INSTR(f) - CODE_START(co));
    if (off < 0) continue;
    const uint32_t at = seen++;
    if (at < GPUMEM_PYSTACK_FRAMES) { /* the innermost frames, all kept */
      if (!user) user = user_code(co);
    } else if (user) {
      break; /* the innermost hold the user's line: deeper frames are not needed */
    } else if (!beyond) {
      if (!user_code(co)) continue; /* library code beyond the innermost: looked at, not kept */
      beyond = 1; /* the user's frame, deep: the gap, it, and its callers */
      depth = INNER;
      code[depth] = 0;
      offset[depth++] = (int32_t)(at - INNER);
    }
    code[depth] = (uintptr_t)co;
    offset[depth++] = off;
    if (depth == GPUMEM_PYSTACK_FRAMES && (user || beyond)) break;
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
int gpumem_pystack_rule(const char *library, const char *user) {
  (void)library, (void)user;
  return -ENOSYS;
}

#endif
