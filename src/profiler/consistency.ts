// Block detail against torch's own figures at the same point of the stream. The hook writes a
// sync record (gpumem_ring.h GPUMEM_ACTION_SYNC) at attach, at every step boundary and at detach:
// torch's allocated, reserved and requested bytes, and how many alloc and free_requested records
// the hook had counted when it read them. The ring header's totals run ahead of the records a
// reader has taken, so they are never compared with the blocks; a sync is, and only where the
// reader has seen exactly the records the figures include.

/** The block size of a request above which the allocator may hand out up to this much more (a
 *  large-pool block is not split for a remainder of 1 MiB or less): the trace carries requests. */
export const LARGE_REMAINDER = 1024 * 1024;

/** What a sync compares: the device's event-derived state where the sync record lies. */
export interface DetailAtSync {
  step: number;
  /** alloc + free_requested records the model has ingested for this device. */
  events: number;
  /** Bytes of the live blocks (block sizes). */
  blockBytes: number;
  /** Live blocks above 1 MiB (each may hide up to LARGE_REMAINDER). */
  largeBlocks: number;
  /** Live requested bytes summed from the records. */
  requested: number;
  /** Block bytes freed that no recorded alloc accounts for (blocks from before the attach). */
  unknownFreeBytes: number;
}

export interface SyncPoint {
  step: number;
  time_us: number;
  torch_allocated_bytes: number;
  torch_reserved_bytes: number;
  torch_requested_bytes: number;
  /** Bytes of the live blocks the model holds at this point. */
  block_bytes: number;
  /** torch's allocated, less memory from before the attach, less the blocks: 0 up to 1 MiB a large block. */
  unaccounted_bytes: number;
  /** torch's requested bytes less those the records account for: 0 when every event was seen. */
  requested_difference_bytes: number;
  agreed: boolean;
}

export class Consistency {
  /** Syncs compared with the blocks, and how they came out. */
  checks = 0;
  agreed = 0;
  disagreed = 0;
  /** Syncs not compared: an event raced the read, or records were lost since the last one. */
  skipped = 0;
  last: SyncPoint | null = null;
  /** What torch held at the first sync beyond the records seen by then (at the attach: all of
   *  it): memory the records will never account for. */
  before: { allocated: number; requested: number } | null = null;
  /** The hook's event count less the model's (the hook's counters start at torch's own counts). */
  private offset = Number.NaN;

  /** The first sync came after records were lost: what it finds unaccounted for was in them, not
   *  necessarily from before the attach. */
  lostBeforeFirst = false;
  /** Where the first sync came after records: the large blocks then live may each hide up to
   *  LARGE_REMAINDER that `before` took in, and that leaves with them when they are freed. */
  private slack = 0;

  /** Records were lost: the counts no longer line up until the next sync re-anchors them. */
  noteLost(): void {
    this.offset = Number.NaN;
    if (this.before === null) this.lostBeforeFirst = true;
  }

  /**
   * A sync record: returns the comparison, or null where none could be made. `events` is the
   * record's count (SYNC_UNSURE or larger when the figures are not tied to this point).
   */
  observe(at: DetailAtSync, t: number, allocated: number, reserved: number, requested: number, events: number): SyncPoint | null {
    if (!(events < 2 ** 63)) {
      this.skipped++;
      return null;
    }
    if (this.before === null) {
      // The first sync: what torch holds that the records seen so far do not account for was
      // there before the recording. At the attach that is all of it; where records came first (an
      // allocation on another thread between the tracker's registration and the attach's sync, as
      // a DDP rank's communicator makes, or the attach's sync lost), the remainder.
      this.before = {
        allocated: Math.max(0, allocated - at.blockBytes + at.unknownFreeBytes),
        requested: Math.max(0, requested - at.requested),
      };
      this.slack = at.largeBlocks * LARGE_REMAINDER;
      this.offset = events - at.events;
    } else if (this.offset !== this.offset) {
      this.offset = events - at.events;
      this.skipped++;
      return null;
    } else if (events - this.offset !== at.events) {
      // Records of this device landed between the read and the sync record (another thread).
      this.skipped++;
      return null;
    }
    return this.compare(at, t, allocated, reserved, requested);
  }

  /**
   * The closed ring's header, read after its last record: torch's final figures (the agent copies
   * them at exit) at the end of the stream, the one moment the header and the records agree on.
   * Recordings made before sync records existed are checked this way too.
   */
  observeEnd(at: DetailAtSync, t: number, allocated: number, reserved: number, requested: number): SyncPoint {
    return this.compare(at, t, allocated, reserved, requested);
  }

  private compare(at: DetailAtSync, t: number, allocated: number, reserved: number, requested: number): SyncPoint {
    const unaccounted = allocated - this.preAttachBytes(at.unknownFreeBytes) - at.blockBytes;
    const requestedDifference = requested - (this.before?.requested ?? 0) - at.requested;
    const agreed = requestedDifference === 0 && unaccounted >= -this.slack && unaccounted <= at.largeBlocks * LARGE_REMAINDER;
    this.checks++;
    if (agreed) this.agreed++;
    else this.disagreed++;
    this.last = {
      step: at.step,
      time_us: t,
      torch_allocated_bytes: allocated,
      torch_reserved_bytes: reserved,
      torch_requested_bytes: requested,
      block_bytes: at.blockBytes,
      unaccounted_bytes: unaccounted,
      requested_difference_bytes: requestedDifference,
      agreed,
    };
    return this.last;
  }

  /** An attach's seed made the blocks what torch holds (seed.ts): nothing is from before the
   *  attach any more. The count offset stays (a seed counts no event). Where the seed's blocks did
   *  not carry requested sizes, the next sync takes torch's requested bytes as its starting point. */
  seeded(requestedKnown: boolean): void {
    if (!requestedKnown) {
      this.restart();
      return;
    }
    this.before = { allocated: 0, requested: 0 };
    this.slack = 0;
    this.lostBeforeFirst = false;
  }

  /** A snapshot replaced the blocks: the next sync is a new starting point. */
  restart(): void {
    this.before = null;
    this.slack = 0;
    this.lostBeforeFirst = false;
    this.offset = Number.NaN;
  }

  /** Bytes torch held before the attach that no free has shown gone yet (block detail lacks them). */
  preAttachBytes(unknownFreeBytes: number): number {
    return this.before === null ? 0 : Math.max(0, this.before.allocated - unknownFreeBytes);
  }
}
