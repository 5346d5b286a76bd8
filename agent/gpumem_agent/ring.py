"""The ring file from Python's side: creating it, and the header fields the agent writes.

Offsets, codes and record formats come from .wire, generated from cuda/gpumem_ring.h (the one
definition of the layout). The hook (C++) writes records and running totals; Python writes the
header once, seeds the totals, and in polling mode (no hook) keeps the totals from
torch.cuda.memory_stats().

A ring has lanes (ABI 2): lane 0 is shared (marks, and the events of a device without a lane),
lane 1 + d holds device d's allocator events. Recordings (save_compact) are one lane: the lanes
merged by time.

Every page of a ring the agent creates is backed before the file is published (create_backed): a
full tmpfs (Docker's 64 MB /dev/shm) then fails here, with words, instead of killing the training
with SIGBUS at the hook's first write to a page that cannot be had. The ring is sized against the
free space of its filesystem, and made smaller, or left without records (polling), where it must.
"""
import errno
import heapq
import mmap
import os
import struct
import time

from .paths import check_replaceable, create_exclusive, publish

from .wire import (HEADER_OFFSET, HEADER_SIZE, LANE_OFFSET, LANE_SIZEOF, MAX_DEVICES, MAX_LANES, MODE, RECORD_FIELDS,
                   RECORD_FORMAT, RECORD_SIZE, RING_ABI_VERSION, RING_MAGIC, TOTALS_FIELDS, TOTALS_FORMAT, TOTALS_OFFSET,
                   TOTALS_SIZEOF)

DEFAULT_CAPACITY = 1 << 18  # records per lane: 16 MiB of file each
MIN_CAPACITY, MAX_CAPACITY = 1 << 10, 1 << 26  # 64 KiB to 4 GiB of records a lane
RECORD = struct.Struct(RECORD_FORMAT)  # wire.RECORD_FIELDS in order: seq first, line last
# Records copied out of the ring and unpacked in one call at most (Ring.lane_records).
STRETCH = 4096
TOTALS = struct.Struct(TOTALS_FORMAT)  # wire.TOTALS_FIELDS in order
_U64 = struct.Struct("<Q")
F_TIME = RECORD_FIELDS.index("time")


def write_index_offset(lane):
    """Where lane `lane`'s write index lies in the header (lane 0: the shared lane's)."""
    return HEADER_OFFSET["write_index"] if lane == 0 else HEADER_OFFSET["lanes"] + (lane - 1) * LANE_SIZEOF + LANE_OFFSET["write_index"]


def lanes_of(abi, n_lanes):
    """The lanes of a ring: ABI 1 rings are one (their n_lanes offset was padding), and so is 0."""
    return 1 if abi < 2 or n_lanes == 0 else n_lanes


def ring_bytes(capacity, lanes):
    return HEADER_SIZE + lanes * capacity * RECORD_SIZE


def fit_capacity(capacity, lanes, free, ranks=1):
    """The largest power of two up to `capacity`, not below MIN_CAPACITY, whose ring of `lanes`
    lanes takes at most half of `free` bytes divided among the node's `ranks`; 0 where even
    MIN_CAPACITY does not fit; `capacity` where `free` is None (a filesystem that states no limit).
    Half: the program's own shared memory (NCCL, DataLoader workers) lives there too. Divided: ranks
    start together and each sees the same free space, so the node's rings stay within that half."""
    if free is None:
        return capacity
    budget = free // (2 * max(1, ranks))
    while capacity >= MIN_CAPACITY and ring_bytes(capacity, lanes) > budget:
        capacity >>= 1
    return capacity if capacity >= MIN_CAPACITY else 0


def free_bytes(directory):
    """Bytes free for us on `directory`'s filesystem; None where it states no size (a tmpfs of
    size=0 reports zero blocks)."""
    st = os.statvfs(directory)
    return None if st.f_blocks == 0 else st.f_bavail * st.f_frsize


def back(fd, size, fallocate=True):
    """Give the file `fd` `size` bytes of backed pages: posix_fallocate, or zeros written through
    every page where the filesystem cannot fallocate. ENOSPC raises here, never later in a writer."""
    if fallocate:
        try:
            os.posix_fallocate(fd, 0, size)
            return
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
    zeros = bytes(1 << 20)
    off = 0
    while off < size:
        off += os.pwrite(fd, zeros[: min(len(zeros), size - off)], off)


def _mib(n):
    return "%.1f MiB" % (n / (1 << 20))


def create_backed(path, capacity=DEFAULT_CAPACITY, n_devices=1, ranks=1):
    """The agent's ring at `path`, every page backed: (Ring, note). `ranks`: the processes of this
    node that make rings beside it (torchrun's LOCAL_WORLD_SIZE). The note (None when the ring is
    as asked) says, for the manifest's notes, that the ring was made smaller, or that it holds no
    records (`ring.header_only`: the totals alone, the agent polls). Raises OSError where not even
    the header fits."""
    lanes = 1 + min(n_devices, MAX_DEVICES)
    ranks = max(1, ranks or 1)
    directory = os.path.dirname(os.path.abspath(path))
    share = "at most half of it" + (", shared by %d ranks" % ranks if ranks > 1 else "")
    cap = capacity
    free = None
    while True:
        free = free_bytes(directory)
        cap = fit_capacity(cap, lanes, free, ranks)
        if not cap:
            break
        try:
            r = Ring(path, capacity=cap, n_devices=n_devices)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            cap >>= 1  # taken since statvfs (another rank starting beside us): half again
            continue
        if cap == capacity:
            return r, None
        return r, ("ring made smaller: %d records a lane instead of %d (%s has %s free; rings take %s)"
                   % (cap, capacity, directory, _mib(free), share))
    r = Ring(path, n_devices=n_devices, header_only=True)
    return r, ("no event records, totals only (polling): %s has %s free, and rings take %s; the smallest ring is %s"
               % (directory, _mib(free or 0), share, _mib(ring_bytes(MIN_CAPACITY, lanes))))


class Ring:
    """A ring file mapped read-write."""

    def __init__(self, path, capacity=DEFAULT_CAPACITY, n_devices=1, create=True, header_only=False):
        """create: a new ring, every page backed, published at `path` once whole (ENOSPC raises and
        leaves nothing). header_only: one lane of one record that no one writes: the header's totals
        for an agent that polls where no ring fits."""
        if capacity & (capacity - 1):
            raise ValueError("capacity must be a power of two")
        self.path = path
        self.header_only = header_only
        if header_only:
            capacity, lanes = 1, 1
        else:
            lanes = 1 + min(n_devices, MAX_DEVICES)
        size = ring_bytes(capacity, lanes)
        if create:
            fd, tmp = create_exclusive(path)
            try:
                back(fd, size)
                self.map = mmap.mmap(fd, size)
            except BaseException:
                os.close(fd)
                os.unlink(tmp)
                raise
            os.close(fd)
            p = self.map
            struct.pack_into("<QIIII", p, 0, RING_MAGIC, RING_ABI_VERSION, HEADER_SIZE, RECORD_SIZE, min(n_devices, MAX_DEVICES))
            struct.pack_into("<Q", p, HEADER_OFFSET["capacity"], capacity)
            struct.pack_into("<I", p, HEADER_OFFSET["n_lanes"], lanes)
            struct.pack_into("<iI", p, HEADER_OFFSET["pid"], os.getpid(), MODE["none"])
            struct.pack_into("<Q", p, HEADER_OFFSET["attach_ns"], time.time_ns())
            # Records carry unix ns until a hook with its own clock calibrates (ns_per_tick 0).
            struct.pack_into("<qqd", p, HEADER_OFFSET["clock_base_ticks"], 0, 0, 0.0)
            try:
                check_replaceable(path)
                os.replace(tmp, path)  # published only once backed and its header whole
            except BaseException:
                p.close()
                os.unlink(tmp)
                raise
        else:
            fd = os.open(path, os.O_RDWR)
            try:
                size = os.fstat(fd).st_size
                if size < HEADER_SIZE:
                    raise ValueError("%s is not a gpumem ring: %d bytes, shorter than its header" % (path, size))
                self.map = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            magic, abi = struct.unpack_from("<QI", self.map, 0)
            cap = struct.unpack_from("<Q", self.map, HEADER_OFFSET["capacity"])[0]
            lanes = lanes_of(abi, struct.unpack_from("<I", self.map, HEADER_OFFSET["n_lanes"])[0])
            why = None
            if magic != RING_MAGIC:
                why = "not a gpumem ring (magic %#x)" % magic
            elif abi not in (1, RING_ABI_VERSION):
                why = "a ring of ABI %d; this agent reads ABI 1 and %d" % (abi, RING_ABI_VERSION)
            elif lanes > MAX_LANES:
                why = "a ring of %d lanes; at most %d (the shared lane and one a device)" % (lanes, MAX_LANES)
            elif cap == 0 or cap & (cap - 1) or HEADER_SIZE + lanes * cap * RECORD_SIZE > size:
                why = "a ring whose capacity (%d, %d lanes) does not match its size (%d bytes)" % (cap, lanes, size)
            if why:
                self.map.close()
                raise ValueError("%s is %s" % (path, why))
        self.capacity = struct.unpack_from("<Q", self.map, HEADER_OFFSET["capacity"])[0]
        self.n_lanes = lanes

    def set(self, fmt, field, *values):
        struct.pack_into(fmt, self.map, HEADER_OFFSET[field], *values)

    def get(self, fmt, field):
        return struct.unpack_from(fmt, self.map, HEADER_OFFSET[field])[0]

    def totals(self, device):
        return dict(zip(TOTALS_FIELDS, TOTALS.unpack_from(self.map, HEADER_OFFSET["totals"] + device * TOTALS_SIZEOF)))

    def set_totals(self, device, **values):
        base = HEADER_OFFSET["totals"] + device * TOTALS_SIZEOF
        for name, value in values.items():
            struct.pack_into("<q", self.map, base + TOTALS_OFFSET[name], int(value))

    def set_calibration(self, base_ticks, base_ns, ns_per_tick):
        self.set("<qqd", "clock_base_ticks", base_ticks, base_ns, ns_per_tick)

    def lane_of(self, device):
        """The lane the hook writes device `device`'s allocator events to."""
        return 1 + device if 0 <= device < self.n_lanes - 1 else 0

    def lane_written(self, lane):
        """Records written to lane `lane` so far (its write index)."""
        return _U64.unpack_from(self.map, write_index_offset(lane))[0]

    def written(self):
        """Records written, every lane together: the position the monitor's reader counts in."""
        return sum(self.lane_written(lane) for lane in range(self.n_lanes))

    def lane_records(self, lane, start=0, end=None):
        """Lane `lane`'s records of indices [start, end) (default: all) still in the ring, oldest
        first, as tuples (seq first: a record's index in its lane is seq - 1). Overwritten ones are
        missing."""
        w = self.lane_written(lane) if end is None else end
        base = HEADER_SIZE + lane * self.capacity * RECORD_SIZE
        out = []
        i = max(start, w - self.capacity)
        # A stretch at a time, up to where the lane wraps, copied out and unpacked in one call:
        # a call per record cost most of a reader's time (the agent's lines read every tick). At
        # most STRETCH records a copy: the user's process holds 256 KiB for it, not a lane's whole.
        while i < w:
            slot = i & (self.capacity - 1)
            n = min(w - i, self.capacity - slot, STRETCH)
            at = base + slot * RECORD_SIZE
            seq = i + 1
            for rec in RECORD.iter_unpack(self.map[at : at + n * RECORD_SIZE]):
                if rec[0] == seq:
                    out.append(rec)
                seq += 1
            i += n
        return out

    def records(self):
        """Every record still in the ring, the lanes merged by time (ties: the lower lane first, as
        the monitor's reader merges them)."""
        lanes = [self.lane_records(lane) for lane in range(self.n_lanes)]
        return lanes[0] if len(lanes) == 1 else list(heapq.merge(*lanes, key=lambda rec: rec[F_TIME]))

    def close(self):
        try:
            self.map.close()
        except (BufferError, ValueError):
            pass

    def finish(self):
        """Mark the ring closed for its readers, then unmap it. Never raises: an agent's exit path."""
        try:
            self.set("<B", "closed", 1)
            self.close()
        except Exception:
            pass


def save_compact(src_path, dst_path):
    """Copy a ring to `dst_path` keeping only its valid records, in the smallest power-of-two ring
    of one lane (the lanes merged by time).

    The copy is a valid ring (header, totals and calibration as they were): what tests and
    `gpumem-tui replay` read as a recording. Written as every file of the agent (paths.publish):
    0600, created beside `dst_path` and renamed onto it; a link, FIFO or another user's file at
    `dst_path` raises paths.UnsafeFile and is left as it was.
    """
    check_replaceable(dst_path)  # before reading the ring: a refusal costs nothing
    src = Ring(src_path, create=False)
    try:
        recs = src.records()
        cap = 1
        while cap < max(1, len(recs)):
            cap <<= 1
        header = bytearray(src.map[:HEADER_SIZE])
    finally:
        src.close()
    struct.pack_into("<Q", header, HEADER_OFFSET["capacity"], cap)
    struct.pack_into("<I", header, HEADER_OFFSET["abi_version"], RING_ABI_VERSION)
    struct.pack_into("<I", header, HEADER_OFFSET["n_lanes"], 1)
    struct.pack_into("<Q", header, HEADER_OFFSET["write_index"], len(recs))
    for lane in range(1, MAX_LANES):
        struct.pack_into("<Q", header, write_index_offset(lane), 0)
    body = bytearray(cap * RECORD_SIZE)
    for j, rec in enumerate(recs):
        RECORD.pack_into(body, j * RECORD_SIZE, j + 1, *rec[1:])
    publish(dst_path, lambda f: (f.write(header), f.write(body)))
    return len(recs)


def save_recording(src_path, path, manifest):
    """gpumem_agent.save_ring: the compact copy of a ring at `path` and `manifest` (with the copy's
    name) beside it as `path` less ".ring", plus ".json". Both names are checked before either is
    written: a refused one (paths.UnsafeFile) leaves neither."""
    import json

    base = path[:-5] if path.endswith(".ring") else path
    meta = base + ".json"
    check_replaceable(path)
    check_replaceable(meta)
    n = save_compact(src_path, path)
    m = dict(manifest, ring=os.path.basename(path))
    publish(meta, lambda f: f.write(json.dumps(m, indent=1).encode()))
    return n


def main(argv=None):
    """python3 -m gpumem_agent.ring compact SRC DST: a fixture-sized copy of a ring (see save_compact)."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python3 -m gpumem_agent.ring", description="Tools for gpumem-tui ring files.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compact", help="copy a ring keeping only its valid records, in the smallest power-of-two ring")
    c.add_argument("src")
    c.add_argument("dst")
    args = ap.parse_args(argv)
    try:
        n = save_compact(args.src, args.dst)
    except (OSError, ValueError) as e:
        sys.stderr.write("gpumem_agent.ring: %s\n" % e)
        return 2
    print("%d records -> %s" % (n, args.dst))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
