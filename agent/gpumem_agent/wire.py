"""The event ring's constants for Python (offsets, codes, struct formats).

Generated from cuda/gpumem_ring.h by cuda/gen-wire.ts: do not edit. Change the header, then run `bun
cuda/gen-wire.ts`.
test/ffi/wire.test.ts fails while it is stale, and holds every value to the C compiler's.
"""

# the bytes "PGMPRNG1" in a little-endian file
RING_MAGIC = 0x31474E52504D4750
RING_ABI_VERSION = 1
HEADER_SIZE = 4096
RECORD_SIZE = 64
MAX_DEVICES = 16
# Actions from here on are marks: records of where the training loop is (written by the agent
# through the hook) and of torch's own figures, not allocator events; they carry no block.
FIRST_MARK = 16
# A sync's `extra` when an allocator event happened while the figures were read.
SYNC_UNSURE = 0xFFFFFFFFFFFFFFFF

# Actions. 0..8 are PyTorch's own TraceEntry::Action values, in PyTorch's order, so the hook stores
# them unchanged; GPUMEM_FIRST_MARK and up are marks. Names (lower case) are the same in C, Python
# (gpumem_agent.wire.ACTION) and TypeScript (src/ffi/wire.ts ACTION). (enum gpumem_action)
ACTION = {
    # a block handed out: address, size
    "alloc": 0,
    # the program freed it: allocated drops
    "free_requested": 1,
    # its stream uses are done: active drops, block reusable
    "free_completed": 2,
    # cudaMalloc of a segment: reserved grows
    "segment_alloc": 3,
    # cudaFree of a segment: reserved shrinks
    "segment_free": 4,
    # expandable segments: pages mapped
    "segment_map": 5,
    # expandable segments: pages unmapped
    "segment_unmap": 6,
    # a snapshot was taken
    "snapshot": 7,
    # out of memory: size = requested, extra = free bytes
    "oom": 8,
    # the phase changed to `phase` (step, range current)
    "phase": 16,
    # step `step` begins (after an optimizer step)
    "step": 17,
    # record_function range `range` entered
    "range_enter": 18,
    # record_function range `range` left
    "range_exit": 19,
    # the allocator's own figures of `device` at this point of the stream: address = allocated, size
    # = reserved, stream = requested bytes (torch.cuda.memory_stats), extra = the device's alloc +
    # free_requested records counted by the hook when they were read (GPUMEM_SYNC_UNSURE: an event
    # raced the read, the figures are not tied to this point)
    "sync": 20,
}
ACTION_NAMES = {
    0: "alloc",
    1: "free_requested",
    2: "free_completed",
    3: "segment_alloc",
    4: "segment_free",
    5: "segment_map",
    6: "segment_unmap",
    7: "snapshot",
    8: "oom",
    16: "phase",
    17: "step",
    18: "range_enter",
    19: "range_exit",
    20: "sync",
}

# Phases: what the training loop was doing when the event happened. (enum gpumem_phase)
PHASE = {
    "other": 0,
    "forward": 1,
    "backward": 2,
    "optimizer": 3,
}
PHASE_NAMES = ["other", "forward", "backward", "optimizer"]

# How the totals are fed (the header's `mode`). (enum gpumem_mode)
MODE = {
    # header written, nothing feeding it yet
    "none": 0,
    # the allocator trace hook: every event, exact totals
    "hook": 1,
    # no hook (no compiler, build failed): totals polled, no records
    "polling": 2,
}
MODE_NAMES = ["none", "hook", "polling"]

# What the hook's tracker does per allocator event: gpumem_hook_attach's `tracker`, chosen by the
# agent from GPUMEM_TUI_HOOK (empty: events, or the name below). (enum gpumem_tracker)
TRACKER = {
    # records and running totals from the event alone
    "events": 0,
    # also copies the allocator's own statistics (costly)
    "exact": 1,
    # returns at once, writes nothing: torch's own cost of a tracker
    "empty": 2,
}
TRACKER_NAMES = ["events", "exact", "empty"]

# One event: 64 bytes, one cache line. (struct gpumem_record: byte offsets of its fields)
RECORD_OFFSET = {
    # uint64_t: index + 1, stored last (release): the reader's check that it is whole
    "seq": 0,
    # uint64_t: the allocator's approximate clock (ticks); see the header's calibration
    "time": 8,
    # uint64_t: block or segment address; 0 for marks (a sync's fields: GPUMEM_ACTION_SYNC)
    "address": 16,
    # uint64_t: bytes; for oom the requested size
    "size": 24,
    # uint64_t: cudaStream_t as an integer
    "stream": 32,
    # uint64_t: oom: bytes free on the device; sync: the hook's event count; otherwise 0
    "extra": 40,
    # uint32_t: training step (optimizer steps completed so far)
    "step": 48,
    # uint32_t: innermost record_function range id (manifest's range table); 0 = none
    "range": 52,
    # uint8_t: enum gpumem_action
    "action": 56,
    # int8_t: CUDA device index
    "device": 57,
    # uint8_t: enum gpumem_phase
    "phase": 58,
    # uint8_t: reserved, 0
    "flags": 59,
    # uint32_t: the line profiler's line id when the event happened (header cur_line); 0 = none
    "line": 60,
}
RECORD_SIZEOF = 64
RECORD_FIELDS = ("seq", "time", "address", "size", "stream", "extra", "step", "range", "action", "device", "phase", "flags", "line")
RECORD_FORMAT = "<6Q2IBb2BI"  # struct module: RECORD_FIELDS in order, padding skipped

# Running totals of one device, in bytes and counts. Written with relaxed atomics by the writer; a
# reader's copy may mix two moments by one event, never more. The trace carries each block's
# requested size, not its rounded block size, so the hook keeps `requested` exactly from events
# alone, and `allocated`/`active` (block sizes) between the agent's copies from
# torch.cuda.memory_stats() as requested-size deltas. Segment sizes are exact. (struct
# gpumem_totals: byte offsets of its fields)
TOTALS_OFFSET = {
    # int64_t: == torch.cuda.memory_allocated(device)
    "allocated": 0,
    # int64_t: == torch.cuda.memory_reserved(device)
    "reserved": 8,
    # int64_t: allocated + freed blocks still waiting for their streams
    "active": 16,
    # int64_t: since the last reset_peaks
    "peak_allocated": 24,
    # int64_t
    "peak_reserved": 32,
    # int64_t
    "peak_active": 40,
    # int64_t: counts since attach
    "n_alloc": 48,
    # int64_t
    "n_free": 56,
    # int64_t
    "n_segment_alloc": 64,
    # int64_t
    "n_segment_free": 72,
    # int64_t
    "n_oom": 80,
    # int64_t: allocation retries (copied from memory_stats by the agent)
    "n_retries": 88,
    # int64_t: bytes the program asked for, live: == memory_stats' requested_bytes
    "requested": 96,
}
TOTALS_SIZEOF = 128
TOTALS_FIELDS = ("allocated", "reserved", "active", "peak_allocated", "peak_reserved", "peak_active", "n_alloc", "n_free", "n_segment_alloc", "n_segment_free", "n_oom", "n_retries", "requested")
TOTALS_FORMAT = "<13q24x"  # struct module: TOTALS_FIELDS in order, padding skipped

# The ring file's first GPUMEM_HEADER_SIZE bytes: what the ring is, who writes it, and the totals.
# (struct gpumem_header: byte offsets of its fields)
HEADER_OFFSET = {
    # uint64_t: GPUMEM_RING_MAGIC
    "magic": 0,
    # uint32_t: GPUMEM_RING_ABI_VERSION
    "abi_version": 8,
    # uint32_t: GPUMEM_HEADER_SIZE
    "header_size": 12,
    # uint32_t: GPUMEM_RECORD_SIZE
    "record_size": 16,
    # uint32_t: devices with totals below
    "n_devices": 20,
    # uint64_t: records; a power of two
    "capacity": 24,
    # int32_t: the writing process
    "pid": 32,
    # uint32_t: enum gpumem_mode
    "mode": 36,
    # int64_t: Clock calibration: unix_ns = clock_base_ns + (time - clock_base_ticks) *
    # clock_ns_per_tick. clock_ns_per_tick == 0 means records already carry unix ns in `time`.
    "clock_base_ticks": 40,
    # int64_t
    "clock_base_ns": 48,
    # double
    "clock_ns_per_tick": 56,
    # uint64_t: unix time of attach, ns
    "attach_ns": 64,
    # uint32_t: The agent's current state, stamped on every record the hook writes.
    "cur_step": 72,
    # uint32_t
    "cur_range": 76,
    # uint8_t
    "cur_phase": 80,
    # uint8_t: 1 once the writer detached cleanly
    "closed": 81,
    # uint64_t: polling mode: last poll, unix ns
    "updated_ns": 88,
    # uint32_t: offset 96: the line profiler's current line id (manifest's line table); 0 = none
    "cur_line": 96,
    # uint64_t: offset 128: next index to claim (atomic)
    "write_index": 128,
    # gpumem_totals[16]: offset 192
    "totals": 192,
}
HEADER_SIZEOF = 2240
HEADER_FIELDS = ("magic", "abi_version", "header_size", "record_size", "n_devices", "capacity", "pid", "mode", "clock_base_ticks", "clock_base_ns", "clock_ns_per_tick", "attach_ns", "cur_step", "cur_range", "cur_phase", "closed", "updated_ns", "cur_line", "write_index", "totals")
