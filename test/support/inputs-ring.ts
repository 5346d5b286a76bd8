// test/agent/inputs_run.py's ring (the real agent on the torch and hook doubles, steps of seven
// sequence lengths under a set_per_process_memory_fraction cap) played into a model.
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, type ProfilerModel } from "../../src/profiler";
import { replay } from "../../src/profiler/replay";
import { recordFields } from "../../src/system/manifest";
import { buildLibrary } from "./native";

export const INPUTS_RUN = join(import.meta.dir, "..", "agent", "inputs_run.py");

export interface InputsRun {
  batch: number;
  seqs: number[];
  fraction: number;
  total: number;
}

export async function inputsRing(quadratic: boolean, more: string[] = []): Promise<{ model: ProfilerModel; out: InputsRun }> {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-inputs-"));
  const agents = join(dir, "agents");
  mkdirSync(agents, { mode: 0o700 });
  const env = { ...(process.env as Record<string, string>), GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"), GPUMEM_TUI_DIR: agents };
  const ring = join(dir, "inputs.ring");
  const p = Bun.spawnSync(["python3", INPUTS_RUN, ring, ...(quadratic ? ["--quadratic"] : []), ...more], { env, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`inputs_run.py failed: ${p.stderr}`);
  const out = JSON.parse(p.stdout.toString().trim().split("\n").pop()!) as InputsRun;
  const rec = openRingRecording(ring);
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), model })) {
    // to the end
  }
  rec.close();
  return { model, out };
}
