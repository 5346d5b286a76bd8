// The live monitor's ledger sample (src/collect/live.ts): the ring's header is read in the agents'
// refresh, before NVML; LiveModels.update reads it again after, and a sample across which torch's
// reserved moved is left out of the ledger. The ring is a GPT-2 run's recorded on an H200
// (test/fixtures/ledger/gpt2.ring.gz, opened from a file as the monitor opens an agent's); the
// segment reserved between the two reads is written into its header with the agent's own Ring,
// as the hook's live totals count one (reserved and n_segment_alloc).
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Agent } from "../../src/collect/agents";
import { LiveModels } from "../../src/collect/live";
import { ROOT } from "../../src/ffi/build";
import { openRing } from "../../src/ffi/ring";
import { parseManifest } from "../../src/system/manifest";
import { agentWrites } from "../support/agent-header";

const FX = join(ROOT, "test", "fixtures", "ledger");
const MiB = 2 ** 20;

/** The recorded agent as the refresh leaves it: ring open, header read (before NVML). */
function recordedAgent(): { agent: Agent; ring: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-same-moment-"));
  const ring = join(dir, "972.ring");
  writeFileSync(ring, Bun.gunzipSync(readFileSync(join(FX, "gpt2.ring.gz"))), { mode: 0o600 });
  const path = join(FX, "gpt2.json");
  const manifest = { ...parseManifest(readFileSync(path, "utf8"), path), ring, socket: null };
  const reader = openRing(ring, { fold: true });
  return { agent: { pid: 972, manifest, manifestStamp: "", ring: reader, header: reader.header(), exited: false, problem: null }, ring, dir };
}

const nvml = (used: number) => [{ agentPid: 972, pid: 972, cudaIndex: 0, nvmlIndex: 0, used_bytes: used }];

test("no segment between the two header reads: the sample is the ledger's (its context NVML − reserved)", () => {
  const { agent, dir } = recordedAgent();
  const reserved = agent.header!.totals[0]!.reserved;
  const live = new LiveModels({ keepTrace: false });
  live.update([agent], nvml(reserved + 610 * MiB), Date.now() * 1000);
  expect(live.byPid.get(972)!.model.ledger.parts(0)!.context_bytes).toBe(610 * MiB);
  agent.ring!.close();
  rmSync(dir, { recursive: true });
});

test("a segment reserved between them: NVML already holds it, the first header does not, and the sample is left out", () => {
  const { agent, ring, dir } = recordedAgent();
  const t = agent.header!.totals[0]!;
  // NVML read after torch reserved 2 MiB more: its figure holds the new segment.
  agentWrites(ring, `r.set_totals(0, reserved=${t.reserved + 2 * MiB}, n_segment_alloc=${t.n_segment_alloc + 1})`);
  const live = new LiveModels({ keepTrace: false });
  live.update([agent], nvml(t.reserved + 2 * MiB + 610 * MiB), Date.now() * 1000);
  // Taken, it would have made a context of 612 MiB.
  expect(live.byPid.get(972)!.model.ledger.parts(0)!.context_bytes).toBeNull();
  agent.ring!.close();
  rmSync(dir, { recursive: true });
});
