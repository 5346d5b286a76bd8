"""The seed of an attach: the allocator's state (torch.cuda.memory_snapshot()) tied to a point of
each device's stream, so the monitor's blocks are whole from the attach on (docs/protocol.md,
"Attaching to a running process"). Pure but for take_seed, which reads the ring and the snapshot."""
import time

from . import wire

SEED_TRIES = 8  # snapshots taken at most, where events race one in a way no split explains
MAX_WINDOW = 1 << 14  # records written during one snapshot beyond which it is taken again

ALLOC, FREE_REQUESTED, FREE_COMPLETED = wire.ACTION["alloc"], wire.ACTION["free_requested"], wire.ACTION["free_completed"]
SEGMENT_ALLOC, SEGMENT_FREE = wire.ACTION["segment_alloc"], wire.ACTION["segment_free"]
SEGMENT_MAP, SEGMENT_UNMAP = wire.ACTION["segment_map"], wire.ACTION["segment_unmap"]
# The events the hook counts (n_alloc + n_free) and the monitor's model counts alike: a seed is
# tied to "right after the k-th of them" on its device.
COUNTED = (ALLOC, FREE_REQUESTED)
ALLOCATOR = (ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP)
F_ADDRESS, F_SIZE, F_STREAM = wire.RECORD_FIELDS.index("address"), wire.RECORD_FIELDS.index("size"), wire.RECORD_FIELDS.index("stream")
F_ACTION, F_DEVICE = wire.RECORD_FIELDS.index("action"), wire.RECORD_FIELDS.index("device")
F_EXTRA = wire.RECORD_FIELDS.index("extra")
SEED_BLOCK_STATES = ("active_allocated", "active_pending_free")  # inactive blocks are free space: left out
# A block's Python frames kept (innermost first) where torch recorded its history: the user's line
# lies among them; native frames (stacks="all") are left out, and each distinct stack is kept once.
MAX_SEED_FRAMES = 64


class SeedError(Exception):
    pass


def _allocated_addresses(segments):
    return {b["address"] for seg in segments for b in seg.get("blocks", ()) if b.get("state") == "active_allocated"}


def split_point(window, segments):
    """The snapshot `segments` (one device's, torch.cuda.memory_snapshot()) was taken at some point
    of `window`, the device's allocator records (action, address) written while it was taken: the
    allocator's lock orders the snapshot among them, so exactly one split p (records [0, p) before
    it, [p, n) after) produced what it shows. The smallest p that agrees with the snapshot on every
    address the window touches (a block allocated or not, a segment there or not), or None where
    none does. Splits that agree alike leave the same blocks once the rest is applied: the first
    is as good as any."""
    allocated = _allocated_addresses(segments)
    seg_addresses = {seg["address"] for seg in segments}
    # Per address: its state in the snapshot, and what the records say it was before the window
    # (the opposite of the first record touching it: an alloc finds it free).
    truth, state = {}, {}
    keyed = []
    for action, address in window:
        if action in (ALLOC, FREE_REQUESTED):
            key, now = ("b", address), action == ALLOC
            truth.setdefault(key, address in allocated)
        elif action in (SEGMENT_ALLOC, SEGMENT_FREE):
            key, now = ("s", address), action == SEGMENT_ALLOC
            truth.setdefault(key, address in seg_addresses)
        else:
            keyed.append(None)
            continue
        state.setdefault(key, not now)
        keyed.append((key, now))
    wrong = sum(1 for k, v in state.items() if v != truth[k])
    if wrong == 0:
        return 0
    for i, kn in enumerate(keyed):
        if kn is None:
            continue
        key, now = kn
        if state[key] != now:
            wrong += -1 if state[key] != truth[key] else 1
            state[key] = now
        if wrong == 0:
            return i + 1
    return None


def _python_frames(frames):
    """[file, line, name] of each Python frame of a snapshot block's `frames`, at most MAX_SEED_FRAMES."""
    out = []
    for f in frames or ():
        if not isinstance(f, dict):
            continue
        name = str(f.get("filename", ""))
        if not (name.startswith("<") or name.endswith(".py") or name.endswith(".pyw")):
            continue  # C/C++ (stacks="all"), or unknown: never the user's line
        out.append([name, int(f.get("line", 0)), str(f.get("name", ""))])
        if len(out) == MAX_SEED_FRAMES:
            break
    return out


def _seed_block(b, stacks):
    """A block as the monitor reads it; with `stacks` (id by frames, shared) its stack's id where
    torch recorded the block's frames (memory history on)."""
    out = {"address": int(b["address"]), "size": int(b["size"]), "requested_size": int(b.get("requested_size", b["size"])), "state": b["state"]}
    frames = _python_frames(b.get("frames")) if stacks is not None else None
    if frames:
        key = tuple(tuple(f) for f in frames)
        out["stack"] = stacks.setdefault(key, len(stacks) + 1)
    return out


def seed_stacks(stacks):
    """The seed's `stacks`: {id: [[file, line, name], ...]} of the ids _seed_block gave."""
    return {str(i): [list(f) for f in key] for key, i in stacks.items()}


def _seed_segment(seg, stacks=None):
    """The parts of a snapshot segment the monitor reads (the rest left out: bounded)."""
    blocks = [_seed_block(b, stacks) for b in seg.get("blocks", ()) if b.get("state") in SEED_BLOCK_STATES]
    pool = seg.get("segment_pool_id") or (0, 0)  # a CUDA graph's or a MemPool's pool: not the cache's
    return {"address": int(seg["address"]), "total_size": int(seg["total_size"]), "stream": int(seg.get("stream", 0)),
            "is_expandable": bool(seg.get("is_expandable", False)), "segment_pool_id": [int(pool[0]), int(pool[1])], "blocks": blocks}


def seed_device(device, records, wb, wa, segments, stacks=None):
    """One device's seed: {"device", "events", "segments"}. `records`: the device's lane records
    (tuples as ring.lane_records gives them) of indices [0, wa), every one present; [wb, wa) were
    written while the snapshot `segments` was taken. The state is taken back to just after the last
    counted event (alloc or free_requested) before the snapshot's point, undoing the segment
    records between: the monitor's model applies the seed right after its `events`-th counted
    event of this device, and every record after that point comes after the seed. `stacks` (a dict
    shared by the devices of one seed): the blocks' frames, where torch kept them."""
    if len(records) != wa:
        raise SeedError("the ring no longer holds the records since the attach (%d of %d)" % (len(records), wa))
    mine = [r[F_DEVICE] == device and r[F_ACTION] in ALLOCATOR for r in records]
    window = [(r[F_ACTION], r[F_ADDRESS]) for r, m in zip(records[wb:wa], mine[wb:wa]) if m]
    rel = split_point(window, segments)
    if rel is None:
        raise SeedError("no point of the %d records written during the snapshot explains it" % len(window))
    # back to an absolute lane index: the rel-th of this device's window records
    p, seen = wb, 0
    while seen < rel:
        seen += mine[p]
        p += 1
    q = p
    while q > 0 and not (mine[q - 1] and records[q - 1][F_ACTION] in COUNTED):
        q -= 1
    segs = {seg["address"]: _seed_segment(seg, stacks) for seg in segments}
    for r in records[q:p]:
        if not (r[F_DEVICE] == device):
            continue
        a = r[F_ACTION]
        if a == SEGMENT_ALLOC:
            segs.pop(r[F_ADDRESS], None)
        elif a == SEGMENT_FREE:
            pool = r[F_EXTRA]  # the record's pool where the hook carries it (first << 32 | second)
            segs[r[F_ADDRESS]] = {"address": r[F_ADDRESS], "total_size": r[F_SIZE], "stream": r[F_STREAM], "is_expandable": False,
                                  "segment_pool_id": [pool >> 32, pool & 0xFFFFFFFF], "blocks": []}
        elif a in (SEGMENT_MAP, SEGMENT_UNMAP):
            raise SeedError("expandable segments mapped pages during the snapshot")
    events = sum(1 for r, m in zip(records[:q], mine[:q]) if m and r[F_ACTION] in COUNTED)
    return {"device": device, "events": events, "segments": [segs[a] for a in sorted(segs)]}


def _peaks_after(agent, device):
    """torch's max_memory_allocated() and max_memory_reserved() of `device`, read after the
    snapshot: peaks reached before the attach lie in no block the monitor will see. Read after the
    seed's point, they may include what the records after it reach too, which the blocks then reach
    as well: the higher of the two is torch's peak from then on. {} where torch cannot say."""
    try:
        s = agent.torch.cuda.memory_stats(device)
        return {"peak_allocated": int(s["allocated_bytes.all.peak"]), "peak_reserved": int(s["reserved_bytes.all.peak"])}
    except Exception:  # a torch without these statistics: the monitor keeps its note on the peak
        return {}


def take_seed(agent, snapshot=None):
    """The seed of every device, from torch.cuda.memory_snapshot() bracketed by the lanes' write
    indices. Taken again where a window is too long or unexplained; raises SeedError after
    SEED_TRIES."""
    ring = agent.ring
    snapshot = snapshot or agent.torch.cuda.memory_snapshot
    why = None
    for _ in range(SEED_TRIES):
        lanes = {d: ring.lane_of(d) for d in range(agent.n_devices)}
        wb = {d: ring.lane_written(lane) for d, lane in lanes.items()}
        write_index = ring.written()
        segments = snapshot()
        wa = {d: ring.lane_written(lane) for d, lane in lanes.items()}
        if any(wa[d] - wb[d] > MAX_WINDOW for d in lanes):
            why = "more than %d records written during the snapshot" % MAX_WINDOW
            continue
        stacks = {}
        try:
            devices = [seed_device(d, ring.lane_records(lanes[d], 0, wa[d]), wb[d], wa[d], [s for s in segments if s.get("device", 0) == d], stacks)
                       for d in lanes]
        except SeedError as e:
            why = str(e)
            continue
        for d in devices:
            d.update(_peaks_after(agent, d["device"]))
        return {"version": 1, "unix_ns": time.time_ns(), "write_index": write_index, "devices": devices, "stacks": seed_stacks(stacks)}
    raise SeedError(why or "no snapshot could be tied to the stream")
