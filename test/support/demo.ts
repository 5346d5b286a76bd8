// A demo directory for tests: a GPT-2 training recorded on an H200 (hf-gpt2.ring, 1 s of steps)
// with an NVML track made of the documents an H100 gave while a GPT-2 training started
// (h100-nvml.ndjson), re-timed onto the ring's clock and renamed to its pid. What it tests is the
// player, the alignment and the screens, not that pairing.
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DocumentSchema } from "../../src/system/schema";
import { trackFromDocuments, trackText } from "../../src/system/recorded";

const FIX = join(import.meta.dir, "..", "fixtures");
const RING_FIRST_US = 1795411480497295; // hf-gpt2.ring's first record
export const DEMO_PID = 2915; // hf-gpt2.json's pid

/** A fresh directory with demo.ring, demo.json, demo.names.json and (withTrack) demo.nvml.ndjson; returns demo.ring's path. */
export function makeDemo(opts: { withTrack?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-demo-test-"));
  for (const [from, to] of [["hf-gpt2.ring", "demo.ring"], ["hf-gpt2.json", "demo.json"], ["hf-gpt2.names.json", "demo.names.json"]]) copyFileSync(join(FIX, from!), join(dir, to!));
  if (opts.withTrack !== false) {
    const docs = readFileSync(join(FIX, "h100-nvml.ndjson"), "utf8").trim().split("\n").map((l) => DocumentSchema.parse(JSON.parse(l)));
    // The process appeared at the third document: that moment is the ring's first record.
    const shiftMs = RING_FIRST_US / 1000 - docs[2]!.time_unix_ms;
    const moved = docs.map((d) => ({ ...d, time_unix_ms: d.time_unix_ms + shiftMs, processes: d.processes.map((p) => ({ ...p, pid: DEMO_PID, agent_pid: DEMO_PID })) }));
    const track = trackFromDocuments(moved, { pid: DEMO_PID, from_us: 0, to_us: Infinity, every_ms: 250, device: 0 });
    writeFileSync(join(dir, "demo.nvml.ndjson"), trackText(track));
  }
  return join(dir, "demo.ring");
}
