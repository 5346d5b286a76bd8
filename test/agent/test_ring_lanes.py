"""The ring's lanes from the agent's side (no torch): a ring of one lane per device plus the shared
lane, its records merged by time, compacted to one lane, and its geometry checked. That the
monitor's reader reads the compact copy to the same records: test/agent/ring-compact.test.ts."""
import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "agent"))

from gpumem_agent import ring  # noqa: E402


class Lanes(unittest.TestCase):
    def test_lanes_merge_by_time_and_compact_to_one_lane(self):
        d = tempfile.mkdtemp()
        r = ring.Ring(os.path.join(d, "a.ring"), capacity=8, n_devices=2)
        # The shared lane and one lane per device, the file sized for all three (sparse).
        self.assertEqual((r.n_lanes, os.path.getsize(r.path)), (3, ring.HEADER_SIZE + 3 * 8 * ring.RECORD_SIZE))
        self.assertEqual([r.lane_of(dev) for dev in (0, 1, 2, -1)], [1, 2, 0, 0])

        def put(lane, times, device):
            base = ring.HEADER_SIZE + lane * r.capacity * ring.RECORD_SIZE
            for i, t in enumerate(times):
                ring.RECORD.pack_into(r.map, base + (i % 8) * ring.RECORD_SIZE, i + 1, t, 0x1000 + t, 512, 0, 0, 0, 0, 0, device, 0, 0, 0)
            struct.pack_into("<Q", r.map, ring.write_index_offset(lane), len(times))

        put(0, [5], -1)
        put(1, list(range(100, 112)), 0)  # 12 records into 8 slots: the first 4 lapped
        put(2, [2, 107], 1)
        self.assertEqual(r.written(), 15)
        self.assertEqual([x[1] for x in r.lane_records(1, 5, 9)], [105, 106, 107, 108])
        want = [2, 5, 104, 105, 106, 107, 107, 108, 109, 110, 111]
        got = r.records()
        self.assertEqual([x[1] for x in got], want)
        self.assertEqual([x[9] for x in got if x[1] == 107], [0, 1])  # a tie: the lower lane first
        n = ring.save_compact(r.path, os.path.join(d, "b.ring"))
        c = ring.Ring(os.path.join(d, "b.ring"), create=False)
        self.assertEqual((n, c.n_lanes, c.get("<I", "abi_version"), c.get("<I", "n_lanes"), c.capacity, c.written()),
                         (11, 1, ring.RING_ABI_VERSION, 1, 16, 11))
        self.assertEqual([x[1] for x in c.records()], want)
        self.assertEqual([x[0] for x in c.records()], list(range(1, 12)))

    def test_lane_geometry_is_checked(self):
        d = tempfile.mkdtemp()
        many = ring.Ring(os.path.join(d, "many.ring"), capacity=8)
        many.set("<I", "n_lanes", 18)
        many.map.flush()
        short = ring.Ring(os.path.join(d, "short.ring"), capacity=8)
        short.set("<I", "n_lanes", 3)  # the file holds two lanes
        short.map.flush()
        for name, why in [("many.ring", "a ring of 18 lanes; at most 17"), ("short.ring", "a ring whose capacity (8, 3 lanes) does not match its size")]:
            with self.assertRaises(ValueError) as e:
                ring.Ring(os.path.join(d, name), create=False)
            self.assertIn(why, str(e.exception))


if __name__ == "__main__":
    unittest.main()
