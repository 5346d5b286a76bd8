/*
 * The native core of the model's ingest: DeviceState.allocatorRecords' loop (src/profiler/device.ts,
 * where every rule is stated and explained) in C, over the model's own typed arrays, for the records
 * it meets most; see ingest_core.h for what comes in and what goes out. It follows that loop step
 * by step, with the same double arithmetic in the same order (no fast-math, no FMA: the sums must
 * be the TypeScript ones to the bit), and leaves it where it leaves it. Every index read from the
 * state is checked against the lengths TypeScript passed before anything of a record changes: a
 * record that would read outside them is SLOW, untouched, and TypeScript's loop takes it.
 */
#include "ingest_core.h"

/* GCC's -O2 pairs the loop's spilled min/max locals into 16-byte loads of two 8-byte stores just
 * made (a store-forwarding stall: a sixth of the core's time on hf-gpt2.ring): no pairing here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-slp-vectorize")
#endif

#include <math.h>
#include <stddef.h>

#define TWO32 4294967296.0
#define TWO53 9007199254740992.0

/* ECMAScript's ToUint32: what `x >>> 0` gives. */
static inline uint32_t js_u32(double x) {
  if (x >= 0 && x < TWO53) return (uint32_t)(uint64_t)x;
  if (x != x || isinf(x)) return 0;
  double m = fmod(trunc(x), TWO32);
  if (m < 0) m += TWO32;
  return (uint32_t)m;
}

/* address-map.ts hash(), bit for bit (Math.imul is a wrapping 32-bit multiply). */
static inline uint32_t js_hash(double address) {
  uint32_t lo = js_u32(address);
  uint32_t hi = js_u32(address * (1.0 / TWO32)); /* exact: a power of two */
  uint32_t h = ((lo ^ (lo >> 16)) * 0x85ebca6bu) ^ (hi * 0xc2b2ae35u);
  h ^= h >> 13;
  h *= 0x27d4eb2fu;
  return h ^ (h >> 16);
}

/* AddressMap.position: where `address` is, or the empty entry where it would go; -1 where the
 * table holds neither (it is never full: then the state is not the model's). */
static inline int64_t position(const double *keys, uint64_t len, double empty, double address, uint32_t hh) {
  uint64_t mask = len - 1;
  uint64_t i = hh & mask;
  for (uint64_t n = 0; n < len; n++) {
    double k = keys[i];
    if (k == address || k == empty) return (int64_t)i;
    i = (i + 1) & mask;
  }
  return -1;
}

static inline int clz32(uint32_t x) { return x == 0 ? 32 : __builtin_clz(x); }

/* block-sizes.ts log2Floor for 1 <= n < 2^53. */
static inline int log2_floor(double n) {
  return n < TWO32 ? 31 - clz32(js_u32(n)) : 32 + (31 - clz32(js_u32(floor(n / TWO32))));
}

/* block-sizes.ts roundSize with power-of-two divisions, for 0 < request < 2^53 (the caller's). */
static double round_size(double request, const double *divisions) {
  if (request < 512) return 512;
  double plain = ceil(request / 512) * 512;
  int log = log2_floor(request);
  int at = log - 20;
  if (at < 0) at = 0;
  if (at > 15) at = 15;
  double d = divisions[at];
  if (d <= 1 || request <= 512 * d) return plain;
  double fl = ldexp(1.0, log);
  if (fl == request) return request;
  double step = fl / ldexp(1.0, log2_floor(d));
  if (step < 1) return fl * 2;
  return ceil(request / step) * step;
}

/* totals.ts blockSize: the request rounded up to 512 bytes (0 for none). A whole number of bytes
 * below 2^53, as every record carries, in integers: the same value (each step of the double
 * arithmetic is exact there), without the call of ceil() that x86-64's baseline instructions need
 * (a sixth of the core's samples on hf-gpt2.ring, though no faster end to end there). Anything else as the TypeScript does it. */
static inline double block_size(double rq) {
  if (rq <= 0) return 0;
  if (rq < TWO53) {
    uint64_t u = (uint64_t)rq;
    if ((double)u == rq) return (double)((u + 511) & ~(uint64_t)511);
  }
  return ceil(rq / 512) * 512;
}

/* blockFrom (block-sizes.ts). */
static inline double block_from(double f, double rounded, double max_split, double small) {
  return rounded < max_split && f - rounded > small ? rounded : f;
}

#define COL(type, name) type *name = (type *)(uintptr_t)c->name

int64_t gpumem_ingest_run(const gpumem_ingest_columns *c, gpumem_ingest_state *s) {
  COL(const double, time_us);
  COL(const uint8_t, action);
  COL(const int8_t, device);
  COL(const uint8_t, phase);
  COL(const double, address);
  COL(const double, size);
  COL(const double, stream);
  COL(const double, extra);
  COL(const uint32_t, step);
  COL(const uint32_t, range);
  COL(const uint32_t, line);
  COL(const uint32_t, stack);
  COL(double, block_out);
  COL(double, b_address);
  COL(double, b_size);
  COL(double, b_stream);
  COL(double, b_time_us);
  COL(double, b_serial);
  COL(uint32_t, b_step);
  COL(uint32_t, b_range);
  COL(uint8_t, b_phase);
  COL(uint8_t, b_category);
  COL(uint8_t, b_flags);
  COL(uint8_t, b_unsized);
  COL(int32_t, b_chain);
  COL(uint32_t, b_stack);
  COL(uint8_t, b_named);
  COL(int32_t, b_free_slots);
  COL(double, bytes_by_cat);
  COL(double, count_by_cat);
  COL(double, bytes_by_range);
  COL(double, m_keys);
  COL(int32_t, m_vals);
  COL(int32_t, pend_slot);
  COL(double, pend_serial);
  COL(int32_t, log_slot);
  COL(double, log_at);
  COL(double, l_addr);
  COL(double, l_size);
  COL(uint8_t, l_kind);
  COL(uint8_t, l_unsettled);
  COL(int32_t, l_prev);
  COL(int32_t, l_next);
  COL(int32_t, l_entry);
  COL(int32_t, l_free_entry);
  COL(int32_t, l_spare);
  COL(double, l_keys);
  COL(int32_t, l_vals);
  COL(double, live_by_phase);
  COL(double, live_by_range);
  COL(double, counts);
  COL(double, fl_address);
  COL(double, fl_size);
  COL(uint32_t, fl_stack);
  COL(const double, divisions);
  COL(int32_t, names_out);

  const uint64_t batch_len = c->batch_len, block_out_len = c->block_out_len, cap = c->b_capacity;
  const uint64_t n_cat = c->n_cat, n_bytes_by_range = c->n_bytes_by_range, m_len = c->m_len;
  const uint64_t pend_len = c->pend_len, log_len = c->log_len, l_len = c->l_len, l_index_len = c->l_index_len;
  const uint64_t n_live_by_phase = c->n_live_by_phase, n_live_by_range = c->n_live_by_range, n_counts = c->n_counts;
  const uint64_t fl_len = c->fl_len, names_out_len = c->names_out_len;

  const double EMPTY = s->k_empty, DEAD = s->k_dead, SMALL = s->k_small_size, LARGE = s->k_large;
  const double CAT_UNRESOLVED = s->k_cat_unresolved, CAT_GRADIENT = s->k_cat_gradient, CAT_TEMPORARY = s->k_cat_temporary;
  const double RESYNCED = s->k_resynced;
  const double CH_FREE = s->k_chain_free, CH_LIVE = s->k_chain_live, CH_UNKNOWN = s->k_chain_unknown;
  const double A_ALLOC = s->k_action_alloc, A_FREE_COMP = s->k_action_free_completed, A_FREE = s->k_action_free;
  const double ra_rq = s->ra_rq, ra_al = s->ra_al, ra_ac = s->ra_ac, ra_rs = s->ra_rs, ra_count = s->ra_count;
  const double rf_rq = s->rf_rq, rf_al = s->rf_al, rf_ac = s->rf_ac, rf_rs = s->rf_rs, rf_count = s->rf_count;
  const double rc_ac = s->rc_ac;

  /* The stretch and the run's stamps. Indices as TypeScript gave them; never trusted. */
  const double from = s->from, end_d = s->end;
  const double cs = s->cs, cp = s->cp, cr = s->cr, max_range = s->max_range;
  const int alloc_stacks = s->alloc_stacks != 0;
  const double dev = s->dev, st_step = s->step, st_phase = s->phase, st_range = s->range;
  const int has_layout = s->has_layout != 0 && c->l_addr != 0 && l_len > 0 && l_index_len > 0;
  const int power_two = s->power_two != 0;
  const double max_split = s->max_split;
  const int moves_reserved = s->moves_reserved != 0;
  const double phase_start_serial = s->phase_start_serial, range_start_serial = s->range_start_serial;

  const double next_d = s->next;
  int64_t i = next_d >= 0 && next_d <= (double)batch_len ? (int64_t)next_d : -1;
  int64_t end = end_d >= 0 && end_d <= (double)batch_len ? (int64_t)end_d : -1;
  double room = s->room, pre_slot = s->pre_slot;
  double n_free = s->n_free, used = s->used, changes = s->changes, large = s->large, unsized_count = s->unsized_count;
  double m_used = s->m_used, m_size = s->m_size;
  double l_n_spare = s->l_n_spare, l_used = s->l_used, l_at_used = s->l_at_used, l_at_size = s->l_at_size;
  const double l_reindex_at = s->l_reindex_at;
  double pend_n = s->pend_n, log_n = s->log_n, fl_total = s->fl_total;
  double requested = s->requested, allocated = s->allocated, active = s->active, reserved = s->reserved;
  double peak_allocated = s->peak_allocated, peak_active = s->peak_active, serial = s->serial, last_time = s->last_time;
  double unknown_frees = s->unknown_frees, unknown_free_bytes = s->unknown_free_bytes;
  double carry_grad = s->carry_grad, carry_grad_n = s->carry_grad_n;
  int peak_open = s->peak_open != 0;
  double step_peak = s->step_peak, peak_at = s->peak_at, peak_serial = s->peak_serial;
  int peak_here = s->peak_here != 0;
  int new_peak = s->new_peak != 0;
  double peak_reserved = s->peak_reserved, peak_time_us = s->peak_time_us, peak_temp = s->peak_temp;
  int partial = s->partial != 0;
  const double fine_end = s->fine_end;
  double a_min = s->a_min, a_max = s->a_max, r_min = s->r_min, r_max = s->r_max, last_a = s->last_a, last_r = s->last_r;
  double run_alloc = s->run_alloc, run_n_alloc = s->run_n_alloc, run_largest = s->run_largest, run_peak = s->run_peak;
  double run_freed = s->run_freed, run_n_free = s->run_n_free, run_freed_within = s->run_freed_within;
  double run_range_freed_within = s->run_range_freed_within, run_live = s->run_live, folded = s->folded;
  double names_n = s->names_n;

  int why = GPUMEM_INGEST_EXIT_RUN_END;
  int todo = 0;
  int stop = 0;
  /* What the stretch's constants allow at all: anything else is TypeScript's. */
  int ok = m_len > 0 && (m_len & (m_len - 1)) == 0 && n_cat > CAT_UNRESOLVED && CAT_UNRESOLVED >= 0 &&
           st_range >= 0 && st_range < (double)n_bytes_by_range && st_range < (double)n_live_by_range &&
           st_phase >= 0 && st_phase < (double)n_live_by_phase && ra_count < (double)n_counts && rf_count < (double)n_counts &&
           (fl_len & (fl_len - 1)) == 0 && fl_len > 0 && c->time_us != 0 && c->b_address != 0 &&
           st_step >= 0 && st_step < TWO32 && (c->block_out == 0 || block_out_len >= (uint64_t)end);
  if (has_layout && (l_index_len & (l_index_len - 1)) != 0) ok = 0;
  if (i < 0 || end < 0) {
    /* nothing here can be read: TypeScript's loop takes the stretch from where it asked */
    s->why = GPUMEM_INGEST_EXIT_SLOW;
    s->todo = 0;
    s->stop = 0;
    return -1;
  }
  const uint64_t m_mask = m_len - 1, l_mask = l_index_len - 1;
  const uint64_t cat_unres = (uint64_t)CAT_UNRESOLVED;
  const uint64_t range_i = (uint64_t)st_range;

  for (; i < end; i++) {
    const double a = action[i];
    if ((double)i > from) {
      if ((a > A_FREE_COMP && a != A_FREE) || device[i] != dev) break;
      const double st = step[i], rg = range[i];
      if (rg >= max_range || ((st != cs || phase[i] != cp || rg != cr) && st >= cs)) break;
    }
    if (!ok) {
      /* the stretch's own state is not what the core can take (checked once the record is its) */
      why = GPUMEM_INGEST_EXIT_SLOW;
      break;
    }
    const double t = time_us[i];
    const double rq = size[i];
    double rounded;
    if (power_two) {
      if (!(rq > 0 && rq < TWO53)) {
        if (rq <= 0) rounded = 0;
        else {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
      } else rounded = round_size(rq, divisions);
    } else rounded = block_size(rq);

    if (a == A_ALLOC) {
      if (room == 0) break;
      const double addr = address[i];
      const uint32_t hh = js_hash(addr);
      /* ---- checks: nothing changes before they pass ---- */
      int64_t h = -1;
      double slot_d;
      int from_pre = pre_slot >= 0;
      if (from_pre) slot_d = pre_slot;
      else {
        h = position(m_keys, m_len, EMPTY, addr, hh);
        if (h < 0) {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
        if (m_keys[h] == addr && (double)m_vals[h] != DEAD) {
          why = GPUMEM_INGEST_EXIT_REPLACED;
          break;
        }
        if (n_free > 0) {
          if (n_free > (double)cap) {
            why = GPUMEM_INGEST_EXIT_SLOW;
            break;
          }
          slot_d = b_free_slots[(uint64_t)n_free - 1];
        } else slot_d = used;
      }
      if (!(slot_d >= 0 && slot_d < (double)cap) || pend_n >= (double)pend_len || (block_out != NULL && (uint64_t)i >= block_out_len)) {
        why = GPUMEM_INGEST_EXIT_SLOW;
        break;
      }
      const uint64_t slot = (uint64_t)slot_d;
      /* the chain's block at the address: a free one handed out whole or cut, else the layout's own
         alloc (TypeScript's) */
      double size_b = rounded;
      int64_t chain = -1;
      int cut = 0;
      int64_t lh = -1, rslot = -1, rpos = -1;
      double f = 0;
      if (rounded > SMALL && has_layout) {
        lh = position(l_keys, l_index_len, EMPTY, addr, hh);
        if (lh < 0) {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
        const double v = l_keys[lh] == addr ? (double)l_vals[lh] : -1;
        if (v >= (double)l_len) {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
        const int64_t cc = v >= 0 && l_kind[(uint64_t)v] == CH_FREE && l_addr[(uint64_t)v] == addr ? (int64_t)v : -1;
        f = cc >= 0 ? l_size[cc] : 0;
        if (!(f >= rounded)) {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
        chain = cc;
        size_b = block_from(f, rounded, max_split, SMALL);
        if (size_b < f) {
          cut = 1;
          double r_d;
          if (l_n_spare > 0) {
            if (l_n_spare > (double)l_len) {
              why = GPUMEM_INGEST_EXIT_SLOW;
              break;
            }
            r_d = l_spare[(uint64_t)l_n_spare - 1];
          } else r_d = l_used;
          const int64_t n = l_next[chain];
          if (!(r_d >= 0 && r_d < (double)l_len) || n >= (int64_t)l_len) {
            why = GPUMEM_INGEST_EXIT_SLOW;
            break;
          }
          rslot = (int64_t)r_d;
          const double at = addr + size_b;
          rpos = position(l_keys, l_index_len, EMPTY, at, js_hash(at));
          if (rpos < 0) {
            why = GPUMEM_INGEST_EXIT_SLOW;
            break;
          }
        }
      }
      const double cat_count_i = ra_count;
      /* ---- the record ---- */
      if (from_pre) pre_slot = -1;
      else {
        if (n_free > 0) n_free--;
        else used++;
        /* AddressMap.putAt */
        if (m_keys[h] == EMPTY) {
          m_keys[h] = addr;
          m_used++;
          m_size++;
        } else if ((double)m_vals[h] == DEAD) m_size++;
        m_vals[h] = (int32_t)slot;
        if (m_used * 2 > (double)m_mask) todo |= GPUMEM_INGEST_TODO_MAP_FULL;
      }
      room--;
      const double ser = ++serial;
      changes++;
      if (chain >= 0) {
        l_kind[chain] = (uint8_t)CH_LIVE;
        if (cut) {
          l_size[chain] = size_b;
          if (l_n_spare > 0) l_n_spare--;
          else l_used++;
          const double at = addr + size_b;
          l_addr[rslot] = at;
          l_size[rslot] = f - size_b;
          l_kind[rslot] = (uint8_t)CH_FREE;
          l_unsettled[rslot] = 0;
          l_entry[rslot] = -1;
          l_free_entry[rslot] = -1;
          l_prev[rslot] = (int32_t)chain;
          const int32_t n = l_next[chain];
          l_next[rslot] = n;
          l_next[chain] = (int32_t)rslot;
          if (n >= 0) l_prev[n] = (int32_t)rslot;
          if (l_keys[rpos] == EMPTY) {
            l_keys[rpos] = at;
            l_at_used++;
            l_at_size++;
          } else if ((double)l_vals[rpos] == DEAD) l_at_size++;
          l_vals[rpos] = (int32_t)rslot;
          if (l_at_used * 2 > (double)l_mask || l_at_size > l_reindex_at) todo |= GPUMEM_INGEST_TODO_CHAIN_INDEX;
        }
      }
      b_chain[slot] = (int32_t)chain;
      b_address[slot] = addr;
      b_size[slot] = size_b;
      if (block_out != NULL) block_out[i] = size_b;
      b_stream[slot] = stream[i];
      b_time_us[slot] = t;
      b_serial[slot] = ser;
      b_step[slot] = (uint32_t)st_step;
      b_range[slot] = (uint32_t)st_range;
      b_phase[slot] = (uint8_t)st_phase;
      b_category[slot] = (uint8_t)CAT_UNRESOLVED;
      b_flags[slot] = 0;
      b_stack[slot] = stack[i] != 0 ? stack[i] : (alloc_stacks ? js_u32(extra[i]) : 0);
      if (size_b > LARGE) large++;
      bytes_by_cat[cat_unres] += size_b;
      count_by_cat[cat_unres]++;
      bytes_by_range[range_i] += size_b;
      pend_slot[(uint64_t)pend_n] = (int32_t)slot;
      pend_serial[(uint64_t)pend_n] = ser;
      pend_n++;
      requested += ra_rq * rq;
      allocated += ra_al * size_b;
      active += ra_ac * size_b;
      reserved += ra_rs * rq;
      if (allocated > peak_allocated) peak_allocated = allocated;
      if (active > peak_active) peak_active = active;
      if (cat_count_i >= 0) counts[(uint64_t)cat_count_i]++;
      run_live += size_b;
      run_alloc += size_b;
      run_n_alloc++;
      if (size_b > run_largest) run_largest = size_b;
      if (allocated > run_peak) {
        run_peak = allocated;
        if (allocated > step_peak) {
          step_peak = allocated;
          peak_reserved = reserved;
          peak_time_us = t;
          peak_temp = 0;
          new_peak = 1;
          peak_open = 1;
          peak_at = ser;
          peak_serial = ser;
          peak_here = 1;
        }
      }
      last_time = t;
    } else if (a == A_FREE_COMP) {
      /* LargePoolLayout.freeCompleted(address): its block found by address, freed and merged */
      double freed = -1;
      int64_t sl = -1;
      if (rounded > SMALL && has_layout) {
        const double addr = address[i];
        const int64_t p = position(l_keys, l_index_len, EMPTY, addr, js_hash(addr));
        if (p < 0) {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
        if (l_keys[p] == addr && (double)l_vals[p] != DEAD) {
          const int64_t v = l_vals[p];
          if (v < 0 || v >= (int64_t)l_len) {
            why = GPUMEM_INGEST_EXIT_SLOW;
            break;
          }
          if (l_kind[v] != 0 && l_addr[v] == addr && l_kind[v] == CH_LIVE) sl = v;
        }
        if (sl >= 0) {
          const int64_t n = l_next[sl], pv = l_prev[sl];
          if (n >= (int64_t)l_len || pv >= (int64_t)l_len || l_n_spare + 2 > (double)l_len || (n >= 0 && l_kind[n] == CH_UNKNOWN)) {
            why = GPUMEM_INGEST_EXIT_SLOW;
            break;
          }
        }
      }
      if (sl >= 0) {
        freed = l_size[sl];
        l_kind[sl] = (uint8_t)CH_FREE;
        l_unsettled[sl] = 0;
        const int32_t n = l_next[sl];
        if (n >= 0 && l_kind[n] == CH_FREE) {
          l_size[sl] += l_size[n];
          const int32_t nn = l_next[n];
          l_next[sl] = nn;
          if (nn >= 0) l_prev[nn] = (int32_t)sl;
          l_kind[n] = 0;
          l_spare[(uint64_t)l_n_spare++] = n;
        }
        const int32_t p = l_prev[sl];
        if (p >= 0 && l_kind[p] == CH_FREE) {
          l_size[p] += l_size[sl];
          const int32_t nn = l_next[sl];
          l_next[p] = nn;
          if (nn >= 0) l_prev[nn] = p;
          l_kind[sl] = 0;
          l_spare[(uint64_t)l_n_spare++] = (int32_t)sl;
        }
      }
      active += rc_ac * (freed >= 0 ? freed : rounded);
      last_time = t;
    } else {
      /* free_requested, or the fold of one and its free_completed */
      if (peak_open) {
        why = GPUMEM_INGEST_EXIT_COPY_PEAK;
        break;
      }
      const double addr = address[i];
      const int64_t h = position(m_keys, m_len, EMPTY, addr, js_hash(addr));
      if (h < 0) {
        why = GPUMEM_INGEST_EXIT_SLOW;
        break;
      }
      /* a removed entry (DEAD) or none: a block the model never saw, as in the TypeScript loop */
      const double v = m_keys[h] == addr ? (double)m_vals[h] : -1;
      if (v >= (double)cap) {
        why = GPUMEM_INGEST_EXIT_SLOW;
        break;
      }
      const int64_t slot = v >= 0 ? (int64_t)v : -1;
      const double born = slot >= 0 ? b_serial[slot] : INFINITY;
      const int logged = born <= peak_at;
      if (logged && log_n >= (double)log_len) {
        why = GPUMEM_INGEST_EXIT_LOG_FULL;
        break;
      }
      const double size_b = slot >= 0 ? b_size[slot] : rounded;
      const int64_t chain = slot >= 0 ? b_chain[slot] : -1;
      int released = 0;
      if (slot >= 0) {
        const uint64_t cat = b_category[slot], br = b_range[slot], bp = b_phase[slot];
        if (b_flags[slot] == RESYNCED || cat >= n_cat || br >= n_bytes_by_range || (b_step[slot] == st_step && (br >= n_live_by_range || bp >= n_live_by_phase))) {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
        released = !logged;
        if (released && b_named[slot] != 0 && names_n >= (double)names_out_len) {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
        if (released && n_free >= (double)cap) {
          why = GPUMEM_INGEST_EXIT_SLOW;
          break;
        }
      }
      if (block_out != NULL && (uint64_t)i >= block_out_len) {
        why = GPUMEM_INGEST_EXIT_SLOW;
        break;
      }
      /* the fold's chain: its slot where it still holds the block, else found by address */
      int64_t sl = -1;
      const int fold_chain = a == A_FREE && rounded > SMALL && has_layout;
      if (fold_chain) {
        if (chain >= 0 && chain < (int64_t)l_len && l_kind[chain] == CH_LIVE && l_addr[chain] == addr) sl = chain;
        else {
          const int64_t p = position(l_keys, l_index_len, EMPTY, addr, js_hash(addr));
          if (p < 0) {
            why = GPUMEM_INGEST_EXIT_SLOW;
            break;
          }
          if (l_keys[p] == addr && (double)l_vals[p] != DEAD) {
            const int64_t w = l_vals[p];
            if (w < 0 || w >= (int64_t)l_len) {
              why = GPUMEM_INGEST_EXIT_SLOW;
              break;
            }
            if (l_kind[w] != 0 && l_addr[w] == addr && l_kind[w] == CH_LIVE) sl = w;
          }
        }
        if (sl >= 0) {
          const int64_t n = l_next[sl], pv = l_prev[sl];
          if (n >= (int64_t)l_len || pv >= (int64_t)l_len || l_n_spare + 2 > (double)l_len || (n >= 0 && l_kind[n] == CH_UNKNOWN)) {
            why = GPUMEM_INGEST_EXIT_SLOW;
            break;
          }
        }
      }
      /* ---- the record ---- */
      if (slot >= 0) m_vals[h] = (int32_t)DEAD, m_size--;
      if (block_out != NULL) block_out[i] = size_b;
      requested += rf_rq * rq;
      allocated += rf_al * size_b;
      active += rf_ac * size_b;
      reserved += rf_rs * rq;
      if (rf_count >= 0) counts[(uint64_t)rf_count]++;
      run_freed += size_b;
      run_n_free++;
      if (slot >= 0) {
        if (size_b > LARGE) {
          const uint64_t k = (uint64_t)fl_total & (fl_len - 1);
          fl_total++;
          fl_address[k] = addr;
          fl_size[k] = size_b;
          fl_stack[k] = b_stack[slot];
        }
        if (born > phase_start_serial) {
          run_freed_within += size_b;
          if (peak_here && b_category[slot] == CAT_UNRESOLVED && born <= peak_serial) peak_temp += size_b;
        }
        if (born > range_start_serial) run_range_freed_within += size_b;
        const double born_step = b_step[slot];
        if (born_step == st_step) {
          live_by_phase[b_phase[slot]] -= size_b;
          live_by_range[b_range[slot]] -= size_b;
        } else if (born_step < st_step && b_category[slot] == CAT_GRADIENT) {
          if (carry_grad_n > 0) {
            carry_grad -= size_b;
            carry_grad_n--;
          }
        }
        const uint8_t cat = b_category[slot];
        bytes_by_cat[cat] -= size_b;
        count_by_cat[cat]--;
        if (size_b > LARGE) large--;
        bytes_by_range[b_range[slot]] -= size_b;
        if (b_unsized[slot] == 1) {
          b_unsized[slot] = 0;
          unsized_count--;
        }
        changes++;
        if (released) {
          if (b_named[slot] != 0) {
            b_named[slot] = 0;
            names_out[(uint64_t)names_n++] = (int32_t)slot;
          }
          b_flags[slot] = 0;
          b_serial[slot] = -1;
          b_free_slots[(uint64_t)n_free++] = (int32_t)slot;
        } else {
          if (b_category[slot] == CAT_UNRESOLVED) b_category[slot] = (uint8_t)CAT_TEMPORARY;
          log_slot[(uint64_t)log_n] = (int32_t)slot;
          log_at[(uint64_t)log_n] = serial;
          log_n++;
        }
      } else {
        partial = 1;
        unknown_frees++;
        unknown_free_bytes += size_b;
      }
      if (a == A_FREE) {
        double freed = -1;
        if (sl >= 0) {
          freed = l_size[sl];
          l_kind[sl] = (uint8_t)CH_FREE;
          l_unsettled[sl] = 0;
          const int32_t n = l_next[sl];
          if (n >= 0 && l_kind[n] == CH_FREE) {
            l_size[sl] += l_size[n];
            const int32_t nn = l_next[n];
            l_next[sl] = nn;
            if (nn >= 0) l_prev[nn] = (int32_t)sl;
            l_kind[n] = 0;
            l_spare[(uint64_t)l_n_spare++] = n;
          }
          const int32_t p = l_prev[sl];
          if (p >= 0 && l_kind[p] == CH_FREE) {
            l_size[p] += l_size[sl];
            const int32_t nn = l_next[sl];
            l_next[p] = nn;
            if (nn >= 0) l_prev[nn] = p;
            l_kind[sl] = 0;
            l_spare[(uint64_t)l_n_spare++] = (int32_t)sl;
          }
        }
        active += rc_ac * (slot >= 0 || freed < 0 ? size_b : freed);
        last_time = extra[i];
        folded++;
      } else last_time = t;
    }
    const int last = line[i] != 0;
    if (a != A_FREE_COMP) {
      if (t < fine_end) {
        if (allocated < a_min) a_min = allocated;
        if (allocated > a_max) a_max = allocated;
        if (moves_reserved) {
          if (reserved < r_min) r_min = reserved;
          if (reserved > r_max) r_max = reserved;
        }
        last_a = allocated;
        last_r = reserved;
      } else todo |= GPUMEM_INGEST_TODO_BUCKET;
    }
    if (last) {
      stop = 1;
      if (todo == 0) {
        i++;
        break;
      }
    }
    if (todo != 0) {
      why = GPUMEM_INGEST_EXIT_WHOLE;
      i++;
      break;
    }
  }
  s->next = (double)i;
  s->room = room;
  s->pre_slot = pre_slot;
  s->n_free = n_free;
  s->used = used;
  s->changes = changes;
  s->large = large;
  s->unsized_count = unsized_count;
  s->m_used = m_used;
  s->m_size = m_size;
  s->l_n_spare = l_n_spare;
  s->l_used = l_used;
  s->l_at_used = l_at_used;
  s->l_at_size = l_at_size;
  s->pend_n = pend_n;
  s->log_n = log_n;
  s->fl_total = fl_total;
  s->requested = requested;
  s->allocated = allocated;
  s->active = active;
  s->reserved = reserved;
  s->peak_allocated = peak_allocated;
  s->peak_active = peak_active;
  s->serial = serial;
  s->last_time = last_time;
  s->unknown_frees = unknown_frees;
  s->unknown_free_bytes = unknown_free_bytes;
  s->carry_grad = carry_grad;
  s->carry_grad_n = carry_grad_n;
  s->peak_open = peak_open;
  s->step_peak = step_peak;
  s->peak_at = peak_at;
  s->peak_serial = peak_serial;
  s->peak_here = peak_here;
  s->new_peak = new_peak;
  s->peak_reserved = peak_reserved;
  s->peak_time_us = peak_time_us;
  s->peak_temp = peak_temp;
  s->partial = partial;
  s->a_min = a_min;
  s->a_max = a_max;
  s->r_min = r_min;
  s->r_max = r_max;
  s->last_a = last_a;
  s->last_r = last_r;
  s->run_alloc = run_alloc;
  s->run_n_alloc = run_n_alloc;
  s->run_largest = run_largest;
  s->run_peak = run_peak;
  s->run_freed = run_freed;
  s->run_n_free = run_n_free;
  s->run_freed_within = run_freed_within;
  s->run_range_freed_within = run_range_freed_within;
  s->run_live = run_live;
  s->folded = folded;
  s->names_n = names_n;
  s->why = why;
  s->todo = todo;
  s->stop = stop;
  return i;
}
