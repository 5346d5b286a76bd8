"""The ring file from Python's side: creating it, and the header fields the agent writes.

Offsets follow cuda/gpumem_ring.h, the one definition of the layout; tests hold this file to it.
The hook (C++) writes records and running totals; Python writes the header once, seeds the totals,
and in polling mode (no hook) keeps the totals from torch.cuda.memory_stats().
"""
import mmap
import os
import struct
import time

MAGIC = 0x31474E52504D4750
ABI_VERSION = 1
HEADER_SIZE = 4096
RECORD_SIZE = 64
MAX_DEVICES = 16
DEFAULT_CAPACITY = 1 << 18  # 16 MiB of records

MODE_NONE, MODE_HOOK, MODE_POLLING = 0, 1, 2
MODES = {MODE_NONE: "none", MODE_HOOK: "hook", MODE_POLLING: "polling"}

ACTIONS = {
    "alloc": 0, "free_requested": 1, "free_completed": 2, "segment_alloc": 3, "segment_free": 4,
    "segment_map": 5, "segment_unmap": 6, "snapshot": 7, "oom": 8,
    "phase": 16, "step": 17, "range_enter": 18, "range_exit": 19, "sync": 20,
}
PHASES = ["other", "forward", "backward", "optimizer"]

OFF = {
    "magic": 0, "abi_version": 8, "header_size": 12, "record_size": 16, "n_devices": 20,
    "capacity": 24, "pid": 32, "mode": 36, "clock_base_ticks": 40, "clock_base_ns": 48,
    "clock_ns_per_tick": 56, "attach_ns": 64, "cur_step": 72, "cur_range": 76, "cur_phase": 80,
    "closed": 81, "updated_ns": 88, "cur_line": 96, "write_index": 128, "totals": 192,
}
TOTALS = [
    "allocated", "reserved", "active", "peak_allocated", "peak_reserved", "peak_active",
    "n_alloc", "n_free", "n_segment_alloc", "n_segment_free", "n_oom", "n_retries", "requested",
]
TOTALS_SIZE = 128
RECORD = struct.Struct("<QQQQQQIIBbBBI")  # seq time address size stream extra step range action device phase flags line


class Ring:
    """A ring file mapped read-write."""

    def __init__(self, path, capacity=DEFAULT_CAPACITY, n_devices=1, create=True):
        if capacity & (capacity - 1):
            raise ValueError("capacity must be a power of two")
        self.path = path
        size = HEADER_SIZE + capacity * RECORD_SIZE
        if create:
            tmp = "%s.%d.tmp" % (path, os.getpid())
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
            os.close(fd)
            p = self.map
            struct.pack_into("<QIIII", p, 0, MAGIC, ABI_VERSION, HEADER_SIZE, RECORD_SIZE, min(n_devices, MAX_DEVICES))
            struct.pack_into("<Q", p, OFF["capacity"], capacity)
            struct.pack_into("<iI", p, OFF["pid"], os.getpid(), MODE_NONE)
            struct.pack_into("<Q", p, OFF["attach_ns"], time.time_ns())
            # Records carry unix ns until a hook with its own clock calibrates (ns_per_tick 0).
            struct.pack_into("<qqd", p, OFF["clock_base_ticks"], 0, 0, 0.0)
            os.replace(tmp, path)  # published only once its header is whole
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
            cap = struct.unpack_from("<Q", self.map, OFF["capacity"])[0]
            why = None
            if magic != MAGIC:
                why = "not a gpumem ring (magic %#x)" % magic
            elif abi != ABI_VERSION:
                why = "a ring of ABI %d; this agent reads ABI %d" % (abi, ABI_VERSION)
            elif cap == 0 or cap & (cap - 1) or HEADER_SIZE + cap * RECORD_SIZE > size:
                why = "a ring whose capacity (%d) does not match its size (%d bytes)" % (cap, size)
            if why:
                self.map.close()
                raise ValueError("%s is %s" % (path, why))
        self.capacity = struct.unpack_from("<Q", self.map, OFF["capacity"])[0]

    def set(self, fmt, field, *values):
        struct.pack_into(fmt, self.map, OFF[field], *values)

    def get(self, fmt, field):
        return struct.unpack_from(fmt, self.map, OFF[field])[0]

    def totals(self, device):
        base = OFF["totals"] + device * TOTALS_SIZE
        return dict(zip(TOTALS, struct.unpack_from("<13q", self.map, base)))

    def set_totals(self, device, **values):
        base = OFF["totals"] + device * TOTALS_SIZE
        for name, value in values.items():
            struct.pack_into("<q", self.map, base + 8 * TOTALS.index(name), int(value))

    def set_calibration(self, base_ticks, base_ns, ns_per_tick):
        self.set("<qqd", "clock_base_ticks", base_ticks, base_ns, ns_per_tick)

    def records(self, start=0, end=None):
        """The records of indices [start, end) (default: all) still in the ring, oldest first, as
        tuples (seq first: a record's index is seq - 1). Overwritten ones are missing."""
        w = self.get("<Q", "write_index") if end is None else end
        out = []
        for i in range(max(start, w - self.capacity), w):
            rec = RECORD.unpack_from(self.map, HEADER_SIZE + (i & (self.capacity - 1)) * RECORD_SIZE)
            if rec[0] == i + 1:
                out.append(rec)
        return out

    def close(self):
        try:
            self.map.close()
        except (BufferError, ValueError):
            pass


def save_compact(src_path, dst_path):
    """Copy a ring to `dst_path` keeping only its valid records, in the smallest power-of-two ring.

    The copy is a valid ring (header, totals and calibration as they were): what tests and
    `gpumem-tui replay` read as a recording.
    """
    src = Ring(src_path, create=False)
    try:
        recs = src.records()
        cap = 1
        while cap < max(1, len(recs)):
            cap <<= 1
        header = bytearray(src.map[:HEADER_SIZE])
    finally:
        src.close()
    struct.pack_into("<Q", header, OFF["capacity"], cap)
    struct.pack_into("<Q", header, OFF["write_index"], len(recs))
    body = bytearray(cap * RECORD_SIZE)
    for j, rec in enumerate(recs):
        RECORD.pack_into(body, j * RECORD_SIZE, j + 1, *rec[1:])
    fd = os.open(dst_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, bytes(header) + bytes(body))
    finally:
        os.close(fd)
    return len(recs)


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
