// What the native ingest core (cuda/ingest_core.c, src/ffi/ingest-core.ts) is handed for one
// device: the addresses of the model's typed arrays in a table (gpumem_ingest_columns) and its
// scalars in a block of doubles (gpumem_ingest_state), both laid out by cuda/ingest_core.h. The
// table is written again only where a column was replaced (a table grown, a map rebuilt, another
// batch): each call compares a few references, not every address. The scalars are
// DeviceState.nativeRun's to fill and read back (device.ts).

import type { Pointer } from "bun:ffi";
import type { EventBatch } from "../ffi/events";
import { ACTION } from "../ffi/events";
import { addressOf, pointerOf, type IngestCore } from "../ffi/ingest-core";
import { INGEST_COLUMNS_OFFSET, INGEST_COLUMNS_SIZEOF, INGEST_STATE_OFFSET, INGEST_STATE_SIZEOF } from "../ffi/ingest-wire";
import { DEAD, EMPTY, type AddressMap } from "./address-map";
import type { FreeLog } from "./at-peak";
import type { AllocatorRules } from "./block-sizes";
import { SMALL_SIZE } from "./block-sizes";
import { LARGE, RESYNCED, type BlockTable } from "./blocks";
import { CAT_GRADIENT, CAT_TEMPORARY, CAT_UNRESOLVED } from "./categories";
import type { FreedLarge } from "./freed-large";
import { CHAIN_FREE, CHAIN_LIVE, CHAIN_UNKNOWN, type LargePoolLayout } from "./large-pool";
import { ruleRow } from "./totals";

/** The state block's fields as indexes of its Float64Array. */
export const S = Object.fromEntries(Object.entries(INGEST_STATE_OFFSET).map(([k, v]) => [k, v / 8])) as { readonly [K in keyof typeof INGEST_STATE_OFFSET]: number };
const C = Object.fromEntries(Object.entries(INGEST_COLUMNS_OFFSET).map(([k, v]) => [k, v / 8])) as { readonly [K in keyof typeof INGEST_COLUMNS_OFFSET]: number };

/** Released slots whose names the core hands back in one call, at most (more: the record is TypeScript's). */
const NAMES_OUT = 256;

type Column = Float64Array | Int32Array | Uint32Array | Uint8Array | Int8Array;

/** The model's parts whose arrays the core reads and writes (DeviceState's, passed in). */
export interface CoreParts {
  blocks: BlockTable;
  map: AddressMap;
  pendSlot: Int32Array;
  pendSerial: Float64Array;
  log: FreeLog;
  layout: LargePoolLayout;
  liveByPhase: Float64Array;
  liveByRange: Float64Array;
  counts: Float64Array;
  freedLarge: FreedLarge;
  rules: AllocatorRules;
}

export class CoreTables {
  readonly state = new Float64Array(INGEST_STATE_SIZEOF / 8);
  private readonly columns = new BigUint64Array(INGEST_COLUMNS_SIZEOF / 8);
  readonly statePtr: Pointer;
  readonly columnsPtr: Pointer;
  /** Slots released by the last call that had a name (TypeScript forgets their names). */
  readonly namesOut = new Int32Array(NAMES_OUT);
  private readonly divisions = new Float64Array(16);
  // what the table was last written from (references compared at each call)
  private batch: EventBatch | null = null;
  private batchTime: Float64Array | null = null;
  private blockOut: Float64Array | null | undefined = undefined;
  private refs: unknown[] = [];
  /** Columns the table points at: held, so that none is collected while its address is there. */
  held: Column[] = [];

  constructor(readonly core: IngestCore) {
    this.statePtr = pointerOf(this.state);
    this.columnsPtr = pointerOf(this.columns);
    const st = this.state;
    st[S.k_empty] = EMPTY;
    st[S.k_dead] = DEAD;
    st[S.k_small_size] = SMALL_SIZE;
    st[S.k_large] = LARGE;
    st[S.k_cat_unresolved] = CAT_UNRESOLVED;
    st[S.k_cat_gradient] = CAT_GRADIENT;
    st[S.k_cat_temporary] = CAT_TEMPORARY;
    st[S.k_resynced] = RESYNCED;
    st[S.k_chain_free] = CHAIN_FREE;
    st[S.k_chain_live] = CHAIN_LIVE;
    st[S.k_chain_unknown] = CHAIN_UNKNOWN;
    st[S.k_action_alloc] = ACTION.alloc;
    st[S.k_action_free_completed] = ACTION.free_completed;
    st[S.k_action_free] = ACTION.free;
    const RA = ruleRow(ACTION.alloc);
    const RF = ruleRow(ACTION.free_requested);
    const RC = ruleRow(ACTION.free_completed);
    st[S.ra_rq] = RA.rq;
    st[S.ra_al] = RA.al;
    st[S.ra_ac] = RA.ac;
    st[S.ra_rs] = RA.rs;
    st[S.ra_count] = RA.count;
    st[S.rf_rq] = RF.rq;
    st[S.rf_al] = RF.al;
    st[S.rf_ac] = RF.ac;
    st[S.rf_rs] = RF.rs;
    st[S.rf_count] = RF.count;
    st[S.rc_ac] = RC.ac;
    st[S.moves_reserved] = RA.rs !== 0 || RF.rs !== 0 || RC.rs !== 0 ? 1 : 0;
    const c = this.columns;
    c[C.names_out] = addressOf(this.namesOut);
    c[C.names_out_len] = BigInt(NAMES_OUT);
    c[C.divisions] = addressOf(this.divisions);
  }

  /** The batch's columns (and where block sizes go), where they are not the ones the table holds. */
  useBatch(batch: EventBatch, blockOut: Float64Array | null): void {
    if (batch === this.batch && batch.time_us === this.batchTime && blockOut === this.blockOut) return;
    const c = this.columns;
    const put = (at: number, a: Column) => {
      c[at] = addressOf(a);
    };
    put(C.time_us, batch.time_us);
    put(C.action, batch.action);
    put(C.device, batch.device);
    put(C.phase, batch.phase);
    put(C.address, batch.address);
    put(C.size, batch.size);
    put(C.stream, batch.stream);
    put(C.extra, batch.extra);
    put(C.step, batch.step);
    put(C.range, batch.range);
    put(C.line, batch.line);
    put(C.stack, batch.stack);
    // every column holds at least this many records
    let n = batch.time_us.length;
    for (const a of [batch.action, batch.device, batch.phase, batch.address, batch.size, batch.stream, batch.extra, batch.step, batch.range, batch.line, batch.stack]) n = Math.min(n, a.length);
    c[C.batch_len] = BigInt(n);
    if (blockOut !== null && blockOut.length > 0) {
      put(C.block_out, blockOut);
      c[C.block_out_len] = BigInt(blockOut.length);
    } else {
      c[C.block_out] = 0n;
      c[C.block_out_len] = 0n;
    }
    this.batch = batch;
    this.batchTime = batch.time_us;
    this.blockOut = blockOut;
  }

  /** The model's columns, where any was replaced since the table was written. */
  useParts(p: CoreParts): void {
    const b = p.blocks;
    const lay = p.layout;
    const r = this.refs;
    if (
      r.length !== 0 &&
      r[0] === b.address &&
      r[1] === b.bytesByRange &&
      r[2] === p.map.keys &&
      r[3] === p.pendSlot &&
      r[4] === p.log.slot &&
      r[5] === lay.addr &&
      r[6] === lay.at.keys &&
      r[7] === p.liveByRange &&
      r[8] === p.rules &&
      r[9] === b.named &&
      r[10] === b.freeSlots
    )
      return;
    this.refs = [b.address, b.bytesByRange, p.map.keys, p.pendSlot, p.log.slot, lay.addr, lay.at.keys, p.liveByRange, p.rules, b.named, b.freeSlots];
    const c = this.columns;
    const held: Column[] = [];
    const put = (at: number, a: Column) => {
      held.push(a);
      c[at] = addressOf(a);
    };
    put(C.b_address, b.address);
    put(C.b_size, b.size);
    put(C.b_stream, b.stream);
    put(C.b_time_us, b.time_us);
    put(C.b_serial, b.serial);
    put(C.b_step, b.step);
    put(C.b_range, b.range);
    put(C.b_phase, b.phase);
    put(C.b_category, b.category);
    put(C.b_flags, b.flags);
    put(C.b_unsized, b.unsized);
    put(C.b_chain, b.chain);
    put(C.b_stack, b.stack);
    put(C.b_named, b.named);
    put(C.b_free_slots, b.freeSlots);
    // every block column holds this many slots
    let cap = b.capacity;
    for (const a of [b.address, b.size, b.stream, b.time_us, b.serial, b.step, b.range, b.phase, b.category, b.flags, b.unsized, b.chain, b.stack, b.named, b.freeSlots]) cap = Math.min(cap, a.length);
    c[C.b_capacity] = BigInt(cap);
    put(C.bytes_by_cat, b.bytesByCat);
    put(C.count_by_cat, b.countByCat);
    c[C.n_cat] = BigInt(Math.min(b.bytesByCat.length, b.countByCat.length));
    put(C.bytes_by_range, b.bytesByRange);
    c[C.n_bytes_by_range] = BigInt(b.bytesByRange.length);
    put(C.m_keys, p.map.keys);
    put(C.m_vals, p.map.vals);
    c[C.m_len] = BigInt(Math.min(p.map.keys.length, p.map.vals.length, p.map.mask + 1));
    put(C.pend_slot, p.pendSlot);
    put(C.pend_serial, p.pendSerial);
    c[C.pend_len] = BigInt(Math.min(p.pendSlot.length, p.pendSerial.length));
    put(C.log_slot, p.log.slot);
    put(C.log_at, p.log.freedAt);
    c[C.log_len] = BigInt(Math.min(p.log.slot.length, p.log.freedAt.length));
    put(C.l_addr, lay.addr);
    put(C.l_size, lay.size);
    put(C.l_kind, lay.kind);
    put(C.l_unsettled, lay.unsettled);
    put(C.l_prev, lay.prev);
    put(C.l_next, lay.next);
    put(C.l_entry, lay.entry);
    put(C.l_free_entry, lay.freeEntry);
    put(C.l_spare, lay.spare);
    c[C.l_len] = BigInt(Math.min(lay.addr.length, lay.size.length, lay.kind.length, lay.unsettled.length, lay.prev.length, lay.next.length, lay.entry.length, lay.freeEntry.length, lay.spare.length));
    put(C.l_keys, lay.at.keys);
    put(C.l_vals, lay.at.vals);
    c[C.l_index_len] = BigInt(Math.min(lay.at.keys.length, lay.at.vals.length, lay.at.mask + 1));
    put(C.live_by_phase, p.liveByPhase);
    c[C.n_live_by_phase] = BigInt(p.liveByPhase.length);
    put(C.live_by_range, p.liveByRange);
    c[C.n_live_by_range] = BigInt(p.liveByRange.length);
    put(C.counts, p.counts);
    c[C.n_counts] = BigInt(p.counts.length);
    put(C.fl_address, p.freedLarge.address);
    put(C.fl_size, p.freedLarge.size);
    put(C.fl_stack, p.freedLarge.stack);
    c[C.fl_len] = BigInt(Math.min(p.freedLarge.address.length, p.freedLarge.size.length, p.freedLarge.stack.length));
    // power-of-two rounding in C only where every interval's divisions is a plain number there
    const d = p.rules.divisions;
    let plain = p.rules.powerTwo ? d.length === 16 : true;
    for (let k = 0; k < 16; k++) {
      const v = d[k] ?? 0;
      this.divisions[k] = v;
      if (!(v >= 0 && v < 4294967296)) plain = false;
    }
    this.powerTwo = p.rules.powerTwo ? 1 : 0;
    this.usable = plain;
    this.held = held;
  }

  /** The rules' rounding: power-of-two divisions (1) or 512 bytes (0). */
  powerTwo = 0;
  /** The rules are ones the core states the same (else every stretch is TypeScript's). */
  usable = true;
}
