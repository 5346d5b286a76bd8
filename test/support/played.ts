// A recorded ring played into a model, its seed beside it applied (an attach's), as a replay does;
// `untilSteps`: stop once the first device has finished that many steps (a forecast made mid-run).
import { openRingRecording } from "../../src/collect/recording";
import { createModel, type ProfilerModel } from "../../src/profiler";
import { replay } from "../../src/profiler/replay";
import { recordFields } from "../../src/system/manifest";

export async function played(path: string, opts: { seed?: boolean; untilSteps?: number } = {}): Promise<ProfilerModel> {
  const rec = openRingRecording(path);
  const model = createModel();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), seed: opts.seed === false ? null : rec.seed, model })) {
    if (opts.untilSteps !== undefined && (model.devices[0]?.steps.length ?? 0) >= opts.untilSteps) break;
  }
  rec.close();
  return model;
}
