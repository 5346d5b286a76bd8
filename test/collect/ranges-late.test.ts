// The hook numbers a record_function range the moment it is first entered; the agent writes its name
// into the manifest a moment later (its sync loop, every 0.25 s). A tick that reads records of a
// range the manifest did not name yet reads the manifest again, so the screens never show the
// range by number (a transformers GPT-2 recorded on an H200, test/fixtures/hf-gpt2.*).
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Agent } from "../../src/collect/agents";
import { LiveModels } from "../../src/collect/live";
import { openRing } from "../../src/ffi/ring";
import { breakdown } from "../../src/profiler";

const DIR = join(import.meta.dir, "..", "fixtures");
const manifest = JSON.parse(readFileSync(join(DIR, "hf-gpt2.json"), "utf8"));

function agentBeforeItsRangesWereWritten(): Agent {
  return { pid: manifest.pid, manifest: { ...manifest, ring: join(DIR, "hf-gpt2.ring"), socket: null, ranges: {} }, manifestStamp: "", ring: openRing(join(DIR, "hf-gpt2.ring")), header: null, exited: false, problem: null };
}

test("ranges met before the manifest named them: the manifest is read again in the same tick", () => {
  const agent = agentBeforeItsRangesWereWritten();
  const live = new LiveModels({ keepTrace: false });
  let rereads = 0;
  // what the agent's rewrite of the manifest holds by the time it is read again
  live.update([agent], null, Date.now() * 1000, (a) => {
    rereads++;
    a.manifest = { ...a.manifest, ranges: manifest.ranges };
  });
  agent.ring!.close();
  const pm = live.byPid.get(manifest.pid)!;
  expect(rereads).toBe(1);
  const names = breakdown(pm.model, { step: 30 }).ranges.map((r) => r.name);
  expect(names).toEqual(expect.arrayContaining(["train_step", "Optimizer.step#AdamW.step"]));
  for (const n of names) expect(n).not.toMatch(/^range#/);
});

test("without a reread the same records show ranges by number (what the screens showed for a tick)", () => {
  const agent = agentBeforeItsRangesWereWritten();
  const live = new LiveModels({ keepTrace: false });
  live.update([agent], null, Date.now() * 1000);
  agent.ring!.close();
  const names = breakdown(live.byPid.get(manifest.pid)!.model, { step: 30 }).ranges.map((r) => r.name);
  expect(names.some((n) => /^range#\d+$/.test(n ?? ""))).toBe(true);
});
