"""A recorded training's allocator requests replayed through the CUDA caching allocator's rules
(torch 2.x, expandable segments off, no max_split_size): requests rounded to 512 B, <= 1 MiB from
the small pool, segments of 2 MiB / 20 MiB / the request rounded to 2 MiB, best fit (smallest free
block, then lowest address), a block split where the rest is >= 512 B (small) or > 1 MiB (large),
frees merged with free neighbours, and under a cap: the segment that would pass it first makes the
allocator return every wholly free segment (release_cached_blocks), then it retries or raises OOM.

Replayed at batch n from a ring recorded at batch b0, the blocks made in forward or backward and freed
within their step grow by n / b0; the rest keeps its size. At b0 it makes the ring's own segments,
in order. Used to find what the forecast's first-step reserved missed (issue 41, README.md here).

  bun bench/forecast-replay/dump.ts test/fixtures/forecast/gpt2-ckpt.ring.gz /tmp/gpt2-ckpt.json
  python3 bench/forecast-replay/replay.py /tmp/gpt2-ckpt.json gpt2-ckpt [BATCH,...]
"""
import bisect, json, os, re, sys

MiB = 1 << 20
G = 1 << 30


def round_size(s):
    return 512 if s < 512 else (s + 511) // 512 * 512


def segment_size(s):
    if s <= MiB:
        return 2 * MiB
    if s < 10 * MiB:
        return 20 * MiB
    return (s + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)


class Block:
    __slots__ = ("addr", "size", "small", "used", "prev", "next", "seg")

    def __init__(self, addr, size, small, seg):
        self.addr, self.size, self.small, self.seg = addr, size, small, seg
        self.used, self.prev, self.next = False, None, None


class OOM(Exception):
    pass


class Allocator:
    def __init__(self, cap):
        self.cap, self.reserved, self.allocated, self.top = cap, 0, 0, 0
        self.pools = {True: [], False: []}
        self.max_reserved = self.max_allocated = self.releases = 0
        self.segs = {}

    def _key(self, b):
        return (b.size, b.addr)

    def _insert(self, b):
        p = self.pools[b.small]
        p.insert(bisect.bisect_left(p, (self._key(b), 0)), (self._key(b), id(b), b))

    def _remove(self, b):
        p = self.pools[b.small]
        i = bisect.bisect_left(p, (self._key(b), 0))
        while p[i][2] is not b:
            i += 1
        del p[i]

    def _new_segment(self, small, size):
        a = segment_size(size)
        if self.reserved + a > self.cap:
            return None
        b = Block(self.top, a, small, self.top)
        self.top += a + G
        self.reserved += a
        self.segs[b.seg] = a
        self.max_reserved = max(self.max_reserved, self.reserved)
        return b

    def _release_cached(self):
        self.releases += 1
        for small in (False, True):
            for _, _, b in list(self.pools[small]):
                if b.prev is None and b.next is None:
                    self._remove(b)
                    self.reserved -= b.size
                    del self.segs[b.seg]

    def malloc(self, request):
        size = round_size(request)
        small = size <= MiB
        p = self.pools[small]
        i = bisect.bisect_left(p, ((size, -1), 0))
        if i < len(p):
            b = p[i][2]
            del p[i]
        else:
            b = self._new_segment(small, size)
            if b is None:
                self._release_cached()
                b = self._new_segment(small, size)
                if b is None:
                    raise OOM(size, self.reserved, self.allocated)
        rest = b.size - size
        if (small and rest >= 512) or (not small and rest > MiB):
            r = Block(b.addr + size, rest, small, b.seg)
            r.prev, r.next = b, b.next
            if b.next:
                b.next.prev = r
            b.next, b.size = r, size
            self._insert(r)
        b.used = True
        self.allocated += b.size
        self.max_allocated = max(self.max_allocated, self.allocated)
        return b

    def free(self, b):
        b.used = False
        self.allocated -= b.size
        if b.prev is not None and not b.prev.used:
            self._remove(b.prev)
            b = self._merge(b.prev, b)
        if b.next is not None and not b.next.used:
            self._remove(b.next)
            b = self._merge(b, b.next)
        self._insert(b)

    @staticmethod
    def _merge(left, right):
        """`right` joined into its free neighbour `left` (the allocator's merge on free)."""
        left.size += right.size
        left.next = right.next
        if right.next:
            right.next.prev = left
        return left


def replay(rows, ratio, cap, grows):
    """Each step's (max allocated, max reserved), and the OOM where one is raised."""
    a, live, steps, cur = Allocator(cap), {}, [], 0
    for i, (act, step, phase, addr, size) in enumerate(rows):
        if step != cur:
            steps.append((a.max_allocated, a.max_reserved))
            a.max_allocated, a.max_reserved, cur = a.allocated, a.reserved, step
        if act == "alloc":
            try:
                live[addr] = a.malloc(int(size * ratio) if grows[i] else size)
            except OOM as e:
                return steps + [(a.max_allocated, a.max_reserved)], {"step": step, "request": e.args[0], "reserved": e.args[1], "allocated": e.args[2]}, a
        elif act == "free" and addr in live:
            a.free(live.pop(addr))
    return steps + [(a.max_allocated, a.max_reserved)], None, a


def main():
    rows = [r[:5] for r in json.load(open(sys.argv[1]))]
    name = sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    facts = json.load(open(os.path.join(here, "..", "..", "test", "fixtures", "forecast", "facts.json")))
    ring = facts["rings"][name]
    b0, cap = ring["batch"], ring["cap"]["cap_bytes"]
    # Grows with the batch: made in forward or backward and freed within its step.
    made, freed = {}, {}
    for i, (act, step, phase, addr, size) in enumerate(rows):
        if act == "alloc":
            made[addr] = i
        elif act == "free" and addr in made:
            freed[made.pop(addr)] = step
    grows = [r[0] == "alloc" and r[2] in (1, 2) and freed.get(i) == r[1] for i, r in enumerate(rows)]
    # At b0 the replay must make the ring's own segments, in order.
    a, live, mine = Allocator(1 << 60), {}, []
    for act, step, phase, addr, size in rows:
        if act == "alloc":
            before = set(a.segs)
            live[addr] = a.malloc(size)
            mine += [a.segs[k] for k in set(a.segs) - before]
        elif act == "free" and addr in live:
            a.free(live.pop(addr))
    theirs = [r[4] for r in rows if r[0] == "segment_alloc"]
    print(f"{name}: at batch {b0} the replay makes {len(mine)} segments, the ring {len(theirs)}: {'the same, in order' if mine == theirs else 'NOT the same'}")
    truth = {}
    for t in (facts["sweep"]["models"].get(name) or {}).get("fresh", {}).get("trials", []):
        if not t.get("before") or t["before"]["allocated"] == 0:
            truth[t["batch"]] = (t["fits"], t["peaks"], t.get("error"))
    for o in facts.get("one", {}).values():
        if o["model"] == name:
            truth[o["batch"]] = (o["fits"], o.get("steps", []), o.get("error"))
    asked = {int(x) for x in sys.argv[3].split(",")} if len(sys.argv) > 3 else set()
    for n in sorted(set(truth) | asked):
        steps, oom, _ = replay(rows, n / b0, cap, grows)
        line = f"{n:5d} replay {'OOM in step %d (asks %.2f GiB, reserved %.2f, allocated %.2f)' % (oom['step'] + 1, oom['request'] / G, oom['reserved'] / G, oom['allocated'] / G) if oom else 'ran'}; per step allocated/reserved " + " ".join("%.3f/%.3f" % (x / G, y / G) for x, y in steps[:3])
        if n in truth:
            fits, peaks, err = truth[n]
            line += f"\n      torch  {'ran' if fits else 'OOM'}; " + " ".join("%.3f/%.3f" % (p["max_allocated"] / G, p["max_reserved"] / G) for p in peaks[:3])
            if err:
                asked = re.search(r"Tried to allocate [\d.]+ [GM]iB", err)
                line += " | " + (asked.group(0) if asked else "") + "; " + err[err.find("Of the") + 7:]
        print(line)


if __name__ == "__main__":
    main()
