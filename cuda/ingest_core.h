/*
 * ingest_core.h — the native core of the model's ingest (cuda/ingest_core.c): the layout of what
 * TypeScript hands it (src/profiler/device-core.ts), once. cuda/gen-wire.ts writes
 * src/ffi/ingest-wire.ts from this file (names without the GPUMEM_ prefix), and
 * test/ffi/wire.test.ts fails while that file is stale.
 *
 * One call takes a stretch of allocator records (alloc, free_requested, free_completed and the
 * reader's folded free) of one device under one step, phase and range, as DeviceState's flat
 * TypeScript loop does (src/profiler/device.ts allocatorRecords, the one definition of every rule
 * here), over the same memory: the model's typed arrays, whose addresses TypeScript writes into a
 * gpumem_ingest_columns table (again only when one is replaced: a column grown, a map rebuilt),
 * and its scalars in a gpumem_ingest_state block of doubles, read and written back around each
 * call. It leaves where the TypeScript loop leaves, for the same reasons (a call the record needs
 * first, or after a whole record), plus SLOW: a record it does not take (a case only the
 * TypeScript code has, or anything inconsistent with the lengths it was given), left untouched.
 *
 * Plain C11. Fixed-width fields only (the generator's rule): pointers as uint64_t.
 */
#ifndef GPUMEM_INGEST_CORE_H
#define GPUMEM_INGEST_CORE_H

#include <stdint.h>

/* Why a call returned (the state's `why`); before record `next` untouched, or after a whole one. */
enum gpumem_ingest_exit {
  GPUMEM_INGEST_EXIT_RUN_END = 0,   /* the stretch ended (or its last record taken, nothing to do) */
  GPUMEM_INGEST_EXIT_WHOLE = 1,     /* after a whole record, for what `todo` says */
  GPUMEM_INGEST_EXIT_COPY_PEAK = 2, /* before a free: the step's peak's sums are copied first */
  GPUMEM_INGEST_EXIT_LOG_FULL = 3,  /* before a logged free: the log of frees is full */
  GPUMEM_INGEST_EXIT_REPLACED = 4,  /* before an alloc at an address still live */
  GPUMEM_INGEST_EXIT_SLOW = 5       /* before a record the core does not take: TypeScript's loop takes it */
};

/* What is done once a record is whole (bits of the state's `todo`). */
enum gpumem_ingest_todo {
  GPUMEM_INGEST_TODO_MAP_FULL = 1,    /* the block table's address map passed half full */
  GPUMEM_INGEST_TODO_CHAIN_INDEX = 2, /* the large pool's index passed half full, or too stale */
  GPUMEM_INGEST_TODO_BUCKET = 8       /* the record fell after the timeline's open bucket */
};

/* The columns: each an address (0: none) and, where it varies, its length in elements. */
typedef struct gpumem_ingest_columns {
  uint64_t time_us;         /* the batch's columns (EventBatch), `batch_len` long each */
  uint64_t action;
  uint64_t device;
  uint64_t phase;
  uint64_t address;
  uint64_t size;
  uint64_t stream;
  uint64_t extra;
  uint64_t step;
  uint64_t range;
  uint64_t line;
  uint64_t stack;
  uint64_t batch_len;
  uint64_t block_out;       /* where each record's block size goes (0: nowhere) */
  uint64_t block_out_len;
  uint64_t b_address;       /* the block table's columns, `b_capacity` long each */
  uint64_t b_size;
  uint64_t b_stream;
  uint64_t b_time_us;
  uint64_t b_serial;
  uint64_t b_step;
  uint64_t b_range;
  uint64_t b_phase;
  uint64_t b_category;
  uint64_t b_flags;
  uint64_t b_unsized;
  uint64_t b_chain;
  uint64_t b_stack;
  uint64_t b_named;
  uint64_t b_free_slots;
  uint64_t b_capacity;
  uint64_t bytes_by_cat;    /* n_cat long, and count_by_cat */
  uint64_t count_by_cat;
  uint64_t n_cat;
  uint64_t bytes_by_range;
  uint64_t n_bytes_by_range;
  uint64_t m_keys;          /* the address map: m_len entries (a power of two) */
  uint64_t m_vals;
  uint64_t m_len;
  uint64_t pend_slot;       /* the pending blocks (Lifetimes) */
  uint64_t pend_serial;
  uint64_t pend_len;
  uint64_t log_slot;        /* the log of frees at the peak */
  uint64_t log_at;
  uint64_t log_len;
  uint64_t l_addr;          /* the large pool's chains (0: expandable segments, no layout) */
  uint64_t l_size;
  uint64_t l_kind;
  uint64_t l_unsettled;
  uint64_t l_prev;
  uint64_t l_next;
  uint64_t l_entry;
  uint64_t l_free_entry;
  uint64_t l_spare;
  uint64_t l_len;
  uint64_t l_keys;          /* the chains' index: l_index_len entries */
  uint64_t l_vals;
  uint64_t l_index_len;
  uint64_t live_by_phase;   /* the step's live bytes by phase and by range */
  uint64_t n_live_by_phase;
  uint64_t live_by_range;
  uint64_t n_live_by_range;
  uint64_t counts;          /* the totals' counts */
  uint64_t n_counts;
  uint64_t fl_address;      /* the newest large frees, a ring of fl_len (a power of two) */
  uint64_t fl_size;
  uint64_t fl_stack;
  uint64_t fl_len;
  uint64_t divisions;       /* roundup_power2_divisions by interval: 16 */
  uint64_t names_out;       /* slots released that had a name: TypeScript forgets the names */
  uint64_t names_out_len;
} gpumem_ingest_columns;

/* The scalars: constants of the model (written with the columns), then the run's and the loop's. */
typedef struct gpumem_ingest_state {
  double k_empty;           /* constants: AddressMap's EMPTY and DEAD */
  double k_dead;
  double k_small_size;      /* SMALL_SIZE (block-sizes.ts) and LARGE (blocks.ts) */
  double k_large;
  double k_cat_unresolved;
  double k_cat_gradient;
  double k_cat_temporary;
  double k_resynced;        /* the RESYNCED flag */
  double k_chain_free;
  double k_chain_live;
  double k_chain_unknown;
  double k_action_alloc;
  double k_action_free_completed;
  double k_action_free;
  double ra_rq;             /* the totals rule's rows: alloc, free_requested, free_completed */
  double ra_al;
  double ra_ac;
  double ra_rs;
  double ra_count;
  double rf_rq;
  double rf_al;
  double rf_ac;
  double rf_rs;
  double rf_count;
  double rc_ac;
  double from;              /* the stretch: records [next, end) after the caller's `from` */
  double next;
  double end;
  double cs;
  double cp;
  double cr;
  double max_range;
  double alloc_stacks;
  double dev;
  double step;              /* the device's running step, phase and range */
  double phase;
  double range;
  double has_layout;
  double power_two;
  double max_split;
  double moves_reserved;
  double room;
  double pre_slot;
  double n_free;            /* the block table's */
  double used;
  double changes;
  double large;
  double unsized_count;
  double m_used;            /* the address map's */
  double m_size;
  double l_n_spare;         /* the chains' */
  double l_used;
  double l_at_used;
  double l_at_size;
  double l_reindex_at;
  double pend_n;
  double log_n;
  double fl_total;
  double requested;         /* the totals */
  double allocated;
  double active;
  double reserved;
  double peak_allocated;
  double peak_active;
  double serial;
  double last_time;
  double unknown_frees;
  double unknown_free_bytes;
  double carry_grad;
  double carry_grad_n;
  double peak_open;         /* the running step's peak (StepRecord) */
  double step_peak;
  double peak_at;
  double peak_serial;
  double peak_here;
  double new_peak;
  double peak_reserved;
  double peak_time_us;
  double peak_temp;
  double partial;
  double phase_start_serial;
  double range_start_serial;
  double fine_end;          /* the timeline's open bucket */
  double a_min;
  double a_max;
  double r_min;
  double r_max;
  double last_a;
  double last_r;
  double run_alloc;         /* the run's sums (StepAccounting.closeRun) */
  double run_n_alloc;
  double run_largest;
  double run_peak;
  double run_freed;
  double run_n_free;
  double run_freed_within;
  double run_range_freed_within;
  double run_live;
  double folded;
  double names_n;
  double why;               /* what the call says */
  double todo;
  double stop;
} gpumem_ingest_state;

/* The stretch from state->next: the index of the first record not taken (also state->next). */
int64_t gpumem_ingest_run(const gpumem_ingest_columns *c, gpumem_ingest_state *s);

#endif
