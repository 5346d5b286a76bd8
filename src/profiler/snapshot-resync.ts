// Block detail from a PyTorch snapshot's segments, put into a model device by device (the agent's
// dump, a replay's final snapshot): the one way in for a whole snapshot's state.
import type { ProfilerModel } from "./model";
import type { SnapshotSegment } from "./resync";

/**
 * Resynchronize block detail from a PyTorch snapshot's `segments` (parsed from the pickle the
 * agent's dump_snapshot writes): per device, the snapshot's live blocks and segments replace what
 * lost records left behind. `at_us`: the snapshot's time (stamped on blocks the model had not seen).
 */
export function resyncFromSnapshot(
  m: ProfilerModel,
  segments: SnapshotSegment[],
  at_us: number,
): Array<{ device: number; kept: number; added: number; dropped: number }> {
  if (!Array.isArray(segments)) throw new TypeError("a snapshot's segments must be a list");
  const byDevice = new Map<number, SnapshotSegment[]>();
  segments.forEach((seg, k) => {
    if (typeof seg?.address !== "number" || typeof seg.total_size !== "number")
      throw new TypeError(`segments[${k}]: a segment needs numeric address and total_size`);
    for (const [j, b] of (seg.blocks ?? []).entries())
      if (typeof b?.address !== "number" || typeof b.size !== "number" || typeof b.state !== "string")
        throw new TypeError(`segments[${k}].blocks[${j}]: a block needs numeric address and size and a state`);
    const dev = seg.device ?? 0;
    let list = byDevice.get(dev);
    if (!list) byDevice.set(dev, (list = []));
    list.push(seg);
  });
  const out = [];
  for (const [dev, list] of [...byDevice].sort((a, b) => a[0] - b[0])) {
    const d = m.deviceFor(dev, at_us);
    out.push({ device: dev, ...d.resync(list, at_us) });
  }
  return out;
}
