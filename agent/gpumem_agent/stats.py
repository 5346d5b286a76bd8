"""The allocator's own statistics into the ring header: which figures are copied when, from the
nested dict torch keeps (torch._C._cuda_memoryStats) or the flat one memory_stats() makes of it,
and how the figures the hook moves are settled once it runs without losing or doubling an event."""


def stat(s, key):
    """One figure of the allocator's statistics, `key` as torch.cuda.memory_stats() spells it
    ("allocated_bytes.all.current"), from either that flat dict or the nested one it is built from
    (torch._C._cuda_memoryStats); 0 where absent."""
    if key in s:
        return s[key]
    v = s
    for part in key.split("."):
        if not isinstance(v, dict) or part not in v:
            return 0
        v = v[part]
    return v if isinstance(v, int) else 0


def device_stats(torch, device):
    """The allocator's statistics of `device`, nested as torch keeps them. memory_stats() flattens
    and sorts the same dict in Python: about 150 us a call with the GIL held (measured on an H200
    host, bench/agent_parts.py), every SYNC_SECONDS, on the training's interpreter."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_memoryStats", None)
    return raw(device) if raw is not None else torch.cuda.memory_stats(device)


def totals_from_stats(s, mode):
    """The header's totals to copy from the allocator's statistics `s` (flat or nested: see stat).
    With the hook: only the block-size figures (allocated, active and their peaks: the trace
    carries requested sizes, not block sizes) and retries (no event for them); reserved, its peak,
    requested and the counts come from the events alone and are never overwritten. Before the hook
    runs (the seed) and in polling mode: everything; reserved, its peak and the segment counts are
    then settled once the hook runs (settle_totals)."""
    values = dict(
        allocated=stat(s, "allocated_bytes.all.current"),
        active=stat(s, "active_bytes.all.current"),
        peak_allocated=stat(s, "allocated_bytes.all.peak"),
        peak_active=stat(s, "active_bytes.all.peak"),
        n_retries=stat(s, "num_alloc_retries"),
    )
    if mode != "hook":
        values.update(
            reserved=stat(s, "reserved_bytes.all.current"),
            peak_reserved=stat(s, "reserved_bytes.all.peak"),
            requested=stat(s, "requested_bytes.all.current"),
            n_alloc=stat(s, "allocation.all.allocated"),
            n_free=stat(s, "allocation.all.freed"),
            n_segment_alloc=stat(s, "segment.all.allocated"),
            n_segment_free=stat(s, "segment.all.freed"),
            n_oom=stat(s, "num_ooms"),
        )
    return values


# The figures the hook alone moves once it runs (reserved, its peak, the segment counts), as the
# header names them and as torch's statistics spell them: settle_totals copies them once more after
# the hook's attach, since the copy before it misses every event between that copy and the attach.
SETTLED = dict(reserved="reserved_bytes.all.current", peak_reserved="reserved_bytes.all.peak",
               n_segment_alloc="segment.all.allocated", n_segment_free="segment.all.freed")
# What any event that moves a SETTLED figure moves in torch's statistics too: those figures, and the
# allocation count (expandable segments map pages only inside an allocation, which counts, so a map
# and an unmap of the same size between two reads cannot hide).
WITNESS = tuple(SETTLED.values()) + ("allocation.all.allocated", "num_ooms")
SETTLE_TRIES = 20  # at the attach; the sync loop tries again, once a round, until one settles


def settle_totals(ring, device, read_stats):
    """Copy the SETTLED figures of `device` from torch's statistics into the header while the hook
    runs, so that none of its events is lost or counted twice. The hook updates them with plain
    stores under the allocator's lock (one writer), so a write from here is exact only where no
    event ran between a read of the statistics before it and one after it: each read takes that
    lock, so an event in flight during the write finishes before the second read and changes it,
    every event before the first is in the copy, every event after the second adds to it. True
    where that held; False where an event came between (the caller tries again)."""
    s = read_stats(device)
    if not s:
        return True  # no statistics (as sync skips them): the events alone
    ring.set_totals(device, **{field: stat(s, key) for field, key in SETTLED.items()})
    again = read_stats(device)
    return all(stat(s, key) == stat(again, key) for key in WITNESS)
