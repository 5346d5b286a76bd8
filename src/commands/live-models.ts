// The sampling session's models, made the way the commands need them: the profiler is loaded with
// the first agent only, and a tick cannot wait for an import, so a machine without agents
// (`--json --once` there) never loads it (about 9 ms of start-up).
import type { LiveModels } from "../collect/live";

/** A Session's `newModels`. `keepTrace`: the models keep their newest records (the screens: phase
 *  bands and `d`); `screens`: their document's profiles leave out what no screen reads
 *  from it (collect/live.ts). */
export function liveModels(opts: { keepTrace: boolean; screens?: boolean }): () => LiveModels {
  return () => new (require("../collect/live") as typeof import("../collect/live")).LiveModels(opts);
}
