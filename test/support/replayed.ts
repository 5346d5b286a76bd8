// A recorded fixture played to its end into a model, as the screens' tests show it (pid 4242).
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import type { ProcessModel } from "../../src/collect/live";
import { createModel } from "../../src/profiler";
import { replay } from "../../src/profiler/replay";
import { recordFields } from "../../src/system/manifest";

export async function replayed(name: string): Promise<ProcessModel & { source: "replay" }> {
  const rec = openRingRecording(join(import.meta.dir, "..", "fixtures", `${name}.ring`));
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), model })) {
    // to the end
  }
  rec.close();
  return { pid: 4242, model, source: "replay", socket: null, title: `${name}.ring`, ended: true };
}
