/*
 * gpumem_ring.h — the one definition of the event ring's layout (ABI).
 *
 * The in-process hook (cuda/hook.cpp, built by the Python agent against the local torch) is the
 * writer; libgpumem's reader (cuda/ring.c, read through bun:ffi) is the reader. Code that does not
 * include this file takes its constants from files generated from it by cuda/gen-wire.ts:
 * src/ffi/wire.ts (TypeScript) and agent/gpumem_agent/wire.py (Python), each name without its
 * GPUMEM_ prefix. test/ffi/wire.test.ts fails when they are stale or when the C compiler lays this
 * file out otherwise. The generator reads the defines, enums and structs below: keep them plain
 * (one member or field a line, a comment after it or on the lines before it).
 *
 * A ring file is one header (GPUMEM_HEADER_SIZE bytes) followed by `n_lanes` lanes of `capacity`
 * records of GPUMEM_RECORD_SIZE bytes each, capacity a power of two: lane L's records start at
 * GPUMEM_HEADER_SIZE + L * capacity * GPUMEM_RECORD_SIZE. The file is sparse (tmpfs allocates only
 * the pages written): a one-device process touches its device's lane and the shared lane only.
 *
 * Lanes (ABI 2). Lane 0 is the SHARED lane: marks (phase, step, range, sync, from any thread) and the
 * allocator events of a device that has no lane of its own. Several threads may write it at once, so
 * a writer claims an index with one atomic fetch-add on `write_index`, fills the record, and stores
 * `seq = index + 1` last with release order. Lane 1 + d holds the allocator events of CUDA device d
 * (d < n_lanes - 1) and has ONE writer: the allocator calls its trace trackers under the device's
 * lock, so the events of one device are already serialized. Its writer claims with a plain load of
 * `lanes[d].write_index` (no locked instruction: the lock xadd was most of the hook's cost), writes
 * the record with `seq` (gpumem_lane_write), then stores the lane's write index. A writer never waits: when the reader is slow
 * a lane is simply overwritten. A reader copies a record and then checks that `seq` still equals
 * the index it wanted + 1; anything else means the record was lapped (or, in lane 0 only, not
 * finished) and is counted as lost. Each lane is in order; across lanes the reader merges by
 * `time`, from the records available at each read (one that is published late with an older time
 * comes in a later batch). The running totals in the header are kept by the writer apart from the
 * records, so no lost record changes them; what each is exact to is said at gpumem_totals (block
 * sizes move by requested-size deltas between the agent's copies of torch's own statistics).
 *
 * n_lanes 0 or 1 is one lane: the ABI 1 ring, which readers still take as it was (its byte at the
 * n_lanes offset was padding). Recordings (compacted rings, fixtures) are one lane.
 *
 * Plain C99 / C++11. Fixed-width fields, little-endian (x86-64 and aarch64 Linux).
 */
#ifndef GPUMEM_RING_H
#define GPUMEM_RING_H

#include <stdint.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h> /* the device lanes' 16-byte stores (gpumem_lane_write) */
#endif

#define GPUMEM_RING_MAGIC 0x31474E52504D4750ULL /* the bytes "PGMPRNG1" in a little-endian file */
#define GPUMEM_RING_ABI_VERSION 2u
#define GPUMEM_HEADER_SIZE 4096u
#define GPUMEM_RECORD_SIZE 64u
#define GPUMEM_MAX_DEVICES 16u
/* The shared lane and one lane per device, at most. */
#define GPUMEM_MAX_LANES (1 + GPUMEM_MAX_DEVICES)
/* Records a lane holds at most (4 GiB of records): what the agent creates, what a reader takes. */
#define GPUMEM_MAX_CAPACITY 67108864u

/* Actions from here on are marks: records of where the training loop is (written by the agent
 * through the hook) and of torch's own figures, not allocator events; they carry no block. */
#define GPUMEM_FIRST_MARK 16u

/* Actions. 0..8 are PyTorch's own TraceEntry::Action values, in PyTorch's order, so the hook
 * stores them unchanged; GPUMEM_FIRST_MARK and up are marks. Names (lower case) are the same in C,
 * Python (gpumem_agent.wire.ACTION) and TypeScript (src/ffi/wire.ts ACTION). */
enum gpumem_action {
  GPUMEM_ACTION_ALLOC = 0,          /* a block handed out: address, size */
  GPUMEM_ACTION_FREE_REQUESTED = 1, /* the program freed it: allocated drops */
  GPUMEM_ACTION_FREE_COMPLETED = 2, /* its stream uses are done: active drops, block reusable */
  GPUMEM_ACTION_SEGMENT_ALLOC = 3,  /* cudaMalloc of a segment: reserved grows */
  GPUMEM_ACTION_SEGMENT_FREE = 4,   /* cudaFree of a segment: reserved shrinks */
  GPUMEM_ACTION_SEGMENT_MAP = 5,    /* expandable segments: pages mapped */
  GPUMEM_ACTION_SEGMENT_UNMAP = 6,  /* expandable segments: pages unmapped */
  GPUMEM_ACTION_SNAPSHOT = 7,       /* a snapshot was taken */
  GPUMEM_ACTION_OOM = 8,            /* out of memory: size = requested, extra = free bytes */
  GPUMEM_ACTION_FREE = 15,          /* never in a ring: a reader's fold of a free_requested and the
                                     * free_completed that follows it at once (a block with no other
                                     * stream's use pending), one record for the two (ring_fold.c);
                                     * extra = the free_completed's time, in the reader's unit */
  GPUMEM_ACTION_PHASE = 16,         /* the phase changed to `phase` (step, range current); extra: for
                                     * backward and optimizer, the calling thread's Python stack id
                                     * where stacks are on (0 none) */
  GPUMEM_ACTION_STEP = 17,          /* step `step` begins (after an optimizer step) */
  GPUMEM_ACTION_RANGE_ENTER = 18,   /* record_function range `range` entered */
  GPUMEM_ACTION_RANGE_EXIT = 19,    /* record_function range `range` left */
  GPUMEM_ACTION_SYNC = 20,          /* the allocator's own figures of `device` at this point of the
                                     * stream: address = allocated, size = reserved, stream =
                                     * requested bytes (torch.cuda.memory_stats), extra = the
                                     * device's alloc + free_requested records counted by the hook
                                     * when they were read (GPUMEM_SYNC_UNSURE: an event raced the
                                     * read, the figures are not tied to this point) */
  GPUMEM_ACTION_SYNC_PEAKS = 21,    /* right after a SYNC of the same `device` written at a sync point
                                     * (gpumem_hook_sync_point: GPUMEM_TUI_MARKS=hooks), from the same
                                     * reading of the allocator's statistics: address = peak allocated
                                     * (max_memory_allocated), size = peak reserved, stream = active
                                     * bytes (active_bytes.all.current), extra = the point (enum
                                     * gpumem_point). A reader that does not know it skips it */
  GPUMEM_ACTION_INPUT = 22,         /* the input of a step (gpumem_hook_value, GPUMEM_FEATURE_VALUES):
                                     * the outermost module's first tensor argument at the step's
                                     * first forward; size = its first dimension (the batch), address
                                     * = its second (the sequence; 0 for a tensor of one dimension),
                                     * extra = its elements, `device` its device */
  GPUMEM_ACTION_LIMIT = 23          /* the caching allocator's own limit on `device` (gpumem_hook_value):
                                     * size = the bytes it may reserve (the fraction
                                     * torch.cuda.set_per_process_memory_fraction set, times the
                                     * device's total), 0 = none */
};

/* Where a sync point was written (a SYNC_PEAKS record's `extra`): the module, backward and
 * optimizer hooks of the agent's mark-every-hook mode. */
enum gpumem_point {
  GPUMEM_POINT_OTHER = 0,         /* a sync point written from elsewhere */
  GPUMEM_POINT_FORWARD_PRE = 1,   /* a module's forward is about to run */
  GPUMEM_POINT_FORWARD = 2,       /* a module's forward returned */
  GPUMEM_POINT_BACKWARD_PRE = 3,  /* a module's backward is about to run */
  GPUMEM_POINT_BACKWARD = 4,      /* a module's backward returned */
  GPUMEM_POINT_OPTIMIZER_PRE = 5, /* an optimizer step is about to run */
  GPUMEM_POINT_OPTIMIZER = 6      /* an optimizer step returned */
};

/* The caching allocator's smallest block (kMinBlockSize): a block is its request rounded up to a
 * multiple of this. Records carry requests; torch.cuda.memory_allocated() counts blocks. */
#define GPUMEM_MIN_BLOCK_SIZE 512u

/* What each action does to its device's totals (gpumem_totals): the one statement of it. A row:
 * the action; for requested, allocated, active and reserved, +1 (the record's bytes added), -1
 * (taken off) or 0 (left as is); the count it adds one to (none: no count). requested counts the
 * record's size as it is; allocated and active count blocks: a reader that knows the block takes
 * its size (else the request rounded up to GPUMEM_MIN_BLOCK_SIZE), the hook takes the request (the
 * agent's copies from memory_stats put it right); reserved counts segment bytes. Each peak follows
 * its total when it rises. Every action below GPUMEM_FIRST_MARK has a row; marks change no total.
 * Followed by gpumem_totals_apply (the hook), src/profiler/totals.ts (the monitor's model) and
 * gpumem_agent/totals.py (the line profiler), both from TOTALS_RULE, which cuda/gen-wire.ts
 * generates from here; test/profiler/totals-rule.test.ts holds all three to this table and to
 * torch's own figures in every committed recording. */
#define GPUMEM_TOTALS_RULE(X)                          \
  X(ALLOC, +1, +1, +1, 0, n_alloc)                     \
  X(FREE_REQUESTED, -1, -1, 0, 0, n_free)              \
  X(FREE_COMPLETED, 0, 0, -1, 0, none)                 \
  X(FREE, -1, -1, -1, 0, n_free)                       \
  X(SEGMENT_ALLOC, 0, 0, 0, +1, n_segment_alloc)       \
  X(SEGMENT_FREE, 0, 0, 0, -1, n_segment_free)         \
  X(SEGMENT_MAP, 0, 0, 0, +1, none)                    \
  X(SEGMENT_UNMAP, 0, 0, 0, -1, none)                  \
  X(SNAPSHOT, 0, 0, 0, 0, none)                        \
  X(OOM, 0, 0, 0, 0, n_oom)

/* A sync's `extra` when an allocator event happened while the figures were read. */
#define GPUMEM_SYNC_UNSURE UINT64_MAX

/* Phases: what the training loop was doing when the event happened. */
enum gpumem_phase {
  GPUMEM_PHASE_OTHER = 0,
  GPUMEM_PHASE_FORWARD = 1,
  GPUMEM_PHASE_BACKWARD = 2,
  GPUMEM_PHASE_OPTIMIZER = 3
};

/* How the totals are fed (the header's `mode`). */
enum gpumem_mode {
  GPUMEM_MODE_NONE = 0,    /* header written, nothing feeding it yet */
  GPUMEM_MODE_HOOK = 1,    /* the allocator trace hook: every event, totals from the events */
  GPUMEM_MODE_POLLING = 2  /* no hook (no compiler, build failed): totals polled, no records */
};

/* What the hook's tracker does per allocator event: gpumem_hook_attach's `tracker`, chosen by the
 * agent from GPUMEM_TUI_HOOK (empty: events, or the name below). */
enum gpumem_tracker {
  GPUMEM_TRACKER_EVENTS = 0, /* records and running totals from the event alone */
  GPUMEM_TRACKER_EXACT = 1,  /* also copies the allocator's own statistics (costly) */
  GPUMEM_TRACKER_EMPTY = 2   /* returns at once, writes nothing: torch's own cost of a tracker */
};

/* What a hook records beyond the events (gpumem_hook_features; the manifest's `segment_pools`). */
#define GPUMEM_FEATURE_SEGMENT_POOLS 1u /* segment records carry their pool in `extra` */
#define GPUMEM_FEATURE_ALLOC_STACKS 2u  /* alloc records at or above the threshold carry a stack id (cuda/pystack.h) */
#define GPUMEM_FEATURE_SYNC_POINTS 4u   /* gpumem_hook_sync_point: SYNC and SYNC_PEAKS records where the agent asks */
#define GPUMEM_FEATURE_VALUES 8u        /* gpumem_hook_value: INPUT and LIMIT records from the agent */

/* One event: 64 bytes, one cache line. */
typedef struct gpumem_record {
  uint64_t seq;     /* index + 1, stored last (release): the reader's check that it is whole */
  uint64_t time;    /* the allocator's approximate clock (ticks); see the header's calibration */
  uint64_t address; /* block or segment address; 0 for marks (a sync's fields: GPUMEM_ACTION_SYNC);
                     * oom: the failed request's Python stack id where stacks are on (0 none) */
  uint64_t size;    /* bytes; for oom the requested size */
  uint64_t stream;  /* cudaStream_t as an integer */
  uint64_t extra;   /* oom: bytes free on the device; sync: the hook's event count; segment_*: its
                     * pool (first << 32 | second of torch's MempoolId_t; 0 the default pool) where
                     * the hook says GPUMEM_FEATURE_SEGMENT_POOLS; alloc: the Python stack's id
                     * (the manifest's `stacks`; 0 none) where stacks are on; otherwise 0 */
  uint32_t step;    /* training step (optimizer steps completed so far) */
  uint32_t range;   /* innermost record_function range id (manifest's range table); 0 = none */
  uint8_t action;   /* enum gpumem_action */
  int8_t device;    /* CUDA device index */
  uint8_t phase;    /* enum gpumem_phase */
  uint8_t flags;    /* reserved, 0 */
  uint32_t line;    /* the line profiler's line id when the event happened (header cur_line); 0 = none */
} gpumem_record;

/* Running totals of one device, in bytes and counts. Written with relaxed atomics by the writer;
 * a reader's copy may mix two moments by one event, never more.
 * The trace carries each block's requested size, not its rounded block size, so the hook keeps
 * `requested` exactly from events alone, and `allocated`/`active` (block sizes) between the agent's
 * copies from torch.cuda.memory_stats() as requested-size deltas. Segment sizes are exact. */
typedef struct gpumem_totals {
  int64_t allocated;      /* == torch.cuda.memory_allocated(device) */
  int64_t reserved;       /* == torch.cuda.memory_reserved(device) */
  int64_t active;         /* allocated + freed blocks still waiting for their streams */
  int64_t peak_allocated; /* since the last reset_peaks */
  int64_t peak_reserved;
  int64_t peak_active;
  int64_t n_alloc;        /* counts since attach */
  int64_t n_free;
  int64_t n_segment_alloc;
  int64_t n_segment_free;
  int64_t n_oom;
  int64_t n_retries;      /* allocation retries (copied from memory_stats by the agent) */
  int64_t requested;      /* bytes the program asked for, live: == memory_stats' requested_bytes */
  int64_t reserved_fields[3];
} gpumem_totals; /* 128 bytes */

/* A device lane's write index, alone on its cache line: its one writer stores it at every event,
 * and no other lane's writer or the shared lane's fetch-add should bounce that line. */
typedef struct gpumem_lane {
  uint64_t write_index; /* next index of this lane; stored (release) after the record's seq */
  uint8_t pad[56];
} gpumem_lane;

/* The ring file's first GPUMEM_HEADER_SIZE bytes: what the ring is, who writes it, and the totals. */
typedef struct gpumem_header {
  uint64_t magic;             /* GPUMEM_RING_MAGIC */
  uint32_t abi_version;       /* GPUMEM_RING_ABI_VERSION */
  uint32_t header_size;       /* GPUMEM_HEADER_SIZE */
  uint32_t record_size;       /* GPUMEM_RECORD_SIZE */
  uint32_t n_devices;         /* devices with totals below */
  uint64_t capacity;          /* records; a power of two */
  int32_t pid;                /* the writing process */
  uint32_t mode;              /* enum gpumem_mode */
  /* Clock calibration: unix_ns = clock_base_ns + (time - clock_base_ticks) * clock_ns_per_tick.
   * clock_ns_per_tick == 0 means records already carry unix ns in `time`. */
  int64_t clock_base_ticks;
  int64_t clock_base_ns;
  double clock_ns_per_tick;
  uint64_t attach_ns;         /* unix time of attach, ns */
  /* The agent's current state, stamped on every record the hook writes. */
  uint32_t cur_step;
  uint32_t cur_range;
  uint8_t cur_phase;
  uint8_t closed;             /* 1 once the writer detached cleanly */
  uint8_t pad0[6];
  uint64_t updated_ns;        /* polling mode: last poll, unix ns */
  uint32_t cur_line;          /* offset 96: the line profiler's current line id (manifest's line table); 0 = none */
  uint32_t n_lanes;           /* offset 100: lanes of `capacity` records (0 or 1: one lane, as in ABI 1) */
  uint8_t pad1[24];           /* write_index on its own cache line */
  uint64_t write_index;       /* offset 128: the shared lane's (lane 0) next index to claim (atomic) */
  uint8_t pad2[56];
  gpumem_totals totals[GPUMEM_MAX_DEVICES]; /* offset 192 */
  gpumem_lane lanes[GPUMEM_MAX_DEVICES];    /* offset 2240: lanes[d] is lane 1 + d, device d's */
} gpumem_header;

#if defined(__cplusplus)
static_assert(sizeof(gpumem_record) == GPUMEM_RECORD_SIZE, "record size");
static_assert(sizeof(gpumem_totals) == 128, "totals size");
static_assert(sizeof(gpumem_lane) == 64, "lane size");
static_assert(sizeof(gpumem_header) == 192 + 128 * GPUMEM_MAX_DEVICES + 64 * GPUMEM_MAX_DEVICES, "header layout");
static_assert(sizeof(gpumem_header) <= GPUMEM_HEADER_SIZE, "header fits");
static_assert(GPUMEM_ACTION_OOM < GPUMEM_FIRST_MARK && GPUMEM_ACTION_PHASE == GPUMEM_FIRST_MARK, "marks follow the allocator's actions");
#else
_Static_assert(sizeof(gpumem_record) == GPUMEM_RECORD_SIZE, "record size");
_Static_assert(sizeof(gpumem_totals) == 128, "totals size");
_Static_assert(sizeof(gpumem_lane) == 64, "lane size");
_Static_assert(sizeof(gpumem_header) == 192 + 128 * GPUMEM_MAX_DEVICES + 64 * GPUMEM_MAX_DEVICES, "header layout");
_Static_assert(sizeof(gpumem_header) <= GPUMEM_HEADER_SIZE, "header fits");
_Static_assert(GPUMEM_ACTION_OOM < GPUMEM_FIRST_MARK && GPUMEM_ACTION_PHASE == GPUMEM_FIRST_MARK, "marks follow the allocator's actions");
#endif

/* Lane `lane`'s records (lane 0: the shared lane; lane 1 + d: device d's). */
static inline gpumem_record *gpumem_lane_records(gpumem_header *h, uint32_t lane) {
  return (gpumem_record *)((uint8_t *)h + GPUMEM_HEADER_SIZE) + (uint64_t)lane * h->capacity;
}

#define GPUMEM_PREFETCH_AHEAD 8u

/* The slot a later event will fill, fetched for writing now: its cache line is then owned by the
 * time that event's stores land (-2 ns an event on an H100 host, bench/results/hook_cost.md). */
static inline gpumem_record *gpumem_slot(gpumem_header *h, uint32_t lane, uint64_t i) {
  gpumem_record *recs = gpumem_lane_records(h, lane);
  const uint64_t mask = h->capacity - 1;
  __builtin_prefetch(recs + ((i + GPUMEM_PREFETCH_AHEAD) & mask), 1, 3);
  gpumem_record *slot = recs + (i & mask);
  /* Invalidated before it is filled, so that a reader copying the old record notices the lap. */
  __atomic_store_n(&slot->seq, 0, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  return slot;
}

/* Writer side of the shared lane (lane 0), for a writer that fills the record in place (no copy
 * through the stack): claim an index with one atomic fetch-add (any thread may write here), fill
 * every field but `seq`, publish. Never blocks. */
static inline gpumem_record *gpumem_ring_claim(gpumem_header *h, uint64_t *index) {
  uint64_t i = __atomic_fetch_add(&h->write_index, 1, __ATOMIC_RELAXED);
  *index = i;
  return gpumem_slot(h, 0, i);
}

static inline void gpumem_ring_publish(gpumem_record *slot, uint64_t index) {
  __atomic_store_n(&slot->seq, index + 1, __ATOMIC_RELEASE);
}

/* Writer side of device `device`'s own lane (lane 1 + device), for its ONE writer: the allocator
 * calls its trace trackers under the device's lock, so the events of a device never race each other
 * here, and a plain load of the lane's write index claims the slot: no locked instruction on the
 * allocator's hot path. Anything else (marks, other threads) writes the shared lane. Fill every
 * field but `seq`, then gpumem_lane_publish. */
static inline gpumem_record *gpumem_lane_claim(gpumem_header *h, uint32_t device, uint64_t *index) {
  uint64_t i = __atomic_load_n(&h->lanes[device].write_index, __ATOMIC_RELAXED);
  *index = i;
  return gpumem_slot(h, 1 + device, i);
}

/* The record first, then the lane's write index: a reader never sees an index past an unpublished
 * record in a device lane, so only the shared lane has records claimed but not yet published. */
static inline void gpumem_lane_publish(gpumem_header *h, uint32_t device, gpumem_record *slot, uint64_t index) {
  __atomic_store_n(&slot->seq, index + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&h->lanes[device].write_index, index + 1, __ATOMIC_RELEASE);
}

/* Every field of `r` but `seq` into a claimed slot. */
static inline void gpumem_record_fill(gpumem_record *slot, const gpumem_record *r) {
  slot->time = r->time;
  slot->address = r->address;
  slot->size = r->size;
  slot->stream = r->stream;
  slot->extra = r->extra;
  slot->step = r->step;
  slot->range = r->range;
  slot->action = r->action;
  slot->device = r->device;
  slot->phase = r->phase;
  slot->flags = r->flags;
  slot->line = r->line;
}

/* One event into device `device`'s own lane, its ONE writer (see gpumem_lane_claim), in as few
 * stores as the processor allows: the allocator's hot path was bound by its stores, a dozen scalar
 * ones a record. On x86-64 the record goes out as four 16-byte stores, `seq` and `time` first: the
 * processor makes stores visible in program order, so a reader that copied this slot while it was
 * being rewritten (a lap) finds a `seq` other than the one it wanted when it checks after the copy,
 * and no slot needs invalidating first. The lane's write index moves last. Elsewhere: claim, fill,
 * publish. */
static inline void gpumem_lane_write(gpumem_header *h, uint32_t device, uint64_t time, uint64_t address, uint64_t size,
                                     uint64_t stream, uint64_t extra, uint32_t step, uint32_t range, uint8_t action,
                                     int8_t dev, uint8_t phase, uint32_t line) {
#if defined(__x86_64__) && defined(__SSE2__)
  const uint64_t i = __atomic_load_n(&h->lanes[device].write_index, __ATOMIC_RELAXED);
  gpumem_record *recs = gpumem_lane_records(h, 1 + device);
  const uint64_t mask = h->capacity - 1;
  __builtin_prefetch(recs + ((i + GPUMEM_PREFETCH_AHEAD) & mask), 1, 3);
  __m128i *p = (__m128i *)(recs + (i & mask)); /* 64-byte aligned: page-aligned map, 64-byte records */
  /* Bytes 48..63 as two words, little-endian as the struct lays them out. */
  const uint64_t step_range = (uint64_t)step | ((uint64_t)range << 32);
  const uint64_t codes = (uint64_t)action | ((uint64_t)(uint8_t)dev << 8) | ((uint64_t)phase << 16) | ((uint64_t)line << 32);
  _mm_store_si128(p, _mm_set_epi64x((long long)time, (long long)(i + 1)));
  __atomic_thread_fence(__ATOMIC_RELEASE); /* x86: keeps the compiler from moving the stores below above it */
  _mm_store_si128(p + 1, _mm_set_epi64x((long long)size, (long long)address));
  _mm_store_si128(p + 2, _mm_set_epi64x((long long)extra, (long long)stream));
  _mm_store_si128(p + 3, _mm_set_epi64x((long long)codes, (long long)step_range));
  __atomic_store_n(&h->lanes[device].write_index, i + 1, __ATOMIC_RELEASE);
#else
  /* In the struct's order: seq (set at publication), time, address, size, stream, extra, step,
   * range, action, device, phase, flags, line. */
  const gpumem_record r = {0, time, address, size, stream, extra, step, range, action, dev, phase, 0, line};
  uint64_t index;
  gpumem_record *slot = gpumem_lane_claim(h, device, &index);
  gpumem_record_fill(slot, &r);
  gpumem_lane_publish(h, device, slot, index);
#endif
}


/* Writer side of the shared lane: claim, fill from `r`, publish. `r->seq` is ignored and set here. */
static inline void gpumem_ring_push(gpumem_header *h, const gpumem_record *r) {
  uint64_t i;
  gpumem_record *slot = gpumem_ring_claim(h, &i);
  gpumem_record_fill(slot, r);
  gpumem_ring_publish(slot, i);
}

/* Writer side: keep the running totals of one device, as GPUMEM_TOTALS_RULE says (the fold's
 * `free` never reaches the hook). One writer per device (the allocator calls
 * its trackers under the device's lock), so plain relaxed loads and stores: no lock-prefixed
 * read-modify-write on the allocator's hot path. The agent's periodic copy from memory_stats may
 * overwrite a value between a load and a store here; the next copy puts it right. */
#define GPUMEM_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define GPUMEM_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static inline int64_t gpumem_add(int64_t *field, int64_t delta) {
  int64_t v = GPUMEM_LOAD(field) + delta;
  GPUMEM_STORE(field, v);
  return v;
}

static inline void gpumem_peak(int64_t *peak, int64_t value) {
  if (value > GPUMEM_LOAD(peak)) GPUMEM_STORE(peak, value);
}

static inline void gpumem_totals_apply(gpumem_totals *t, uint8_t action, int64_t size) {
  switch (action) {
  case GPUMEM_ACTION_ALLOC:
    gpumem_add(&t->requested, size);
    gpumem_peak(&t->peak_allocated, gpumem_add(&t->allocated, size));
    gpumem_peak(&t->peak_active, gpumem_add(&t->active, size));
    gpumem_add(&t->n_alloc, 1);
    break;
  case GPUMEM_ACTION_FREE_REQUESTED:
    gpumem_add(&t->requested, -size);
    gpumem_add(&t->allocated, -size);
    gpumem_add(&t->n_free, 1);
    break;
  case GPUMEM_ACTION_FREE_COMPLETED:
    gpumem_add(&t->active, -size);
    break;
  case GPUMEM_ACTION_SEGMENT_ALLOC:
    gpumem_add(&t->n_segment_alloc, 1);
    /* fall through */
  case GPUMEM_ACTION_SEGMENT_MAP:
    gpumem_peak(&t->peak_reserved, gpumem_add(&t->reserved, size));
    break;
  case GPUMEM_ACTION_SEGMENT_FREE:
    gpumem_add(&t->n_segment_free, 1);
    /* fall through */
  case GPUMEM_ACTION_SEGMENT_UNMAP:
    gpumem_add(&t->reserved, -size);
    break;
  case GPUMEM_ACTION_OOM:
    gpumem_add(&t->n_oom, 1);
    break;
  default:
    break;
  }
}

#endif /* GPUMEM_RING_H */
