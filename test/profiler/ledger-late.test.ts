// The ledger of a process the monitor first saw after it ran: a transformers GPT-2 started plainly
// on an H200 and attached to after its second step (test/fixtures/ledger/attach-gpt2.*, README).
// Its first sample's NVML − reserved (742 MiB) is the CUDA context (the program's own figure after
// torch.zeros(1): 610 MiB) with the cuBLAS workspaces and kernels step 1 loaded (+132 MiB): the
// monitor cannot tell them apart, and the row must not be presented as the context. Replayed with
// the NVML samples and torch's figures of the monitor's own documents of that run (the attach's
// seed, read from /tmp on the GPU machine, is not in the recording: the header's totals the live
// monitor read at each tick stand for it), and live, the ring opened as the monitor opens an agent's.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Agent } from "../../src/collect/agents";
import { LiveModels } from "../../src/collect/live";
import { ROOT } from "../../src/ffi/build";
import { openRing } from "../../src/ffi/ring";
import { ledgerWords } from "../../src/profiler/ledger";
import { parseManifest } from "../../src/system/manifest";
import { documentSamples, replayLedger } from "../support/ledger-replay";
import facts from "../fixtures/ledger/attach-gpt2.facts.json";

const FX = join(ROOT, "test", "fixtures", "ledger");
const MiB = 2 ** 20;
const sum = (rows: Array<{ bytes: number }>) => rows.reduce((s, r) => s + r.bytes, 0);
const manifestPath = join(FX, "attach-gpt2.json");
const manifest = parseManifest(readFileSync(manifestPath, "utf8"), manifestPath);
const samples = documentSamples(join(FX, "attach-gpt2.run.ndjson.gz"), facts.pid, { header: true });
/** What the program's steps before the attach added outside torch (its own pynvml and torch figures). */
const beforeAttach = facts.events.filter((e) => e.name === "step1" || e.name === "step2").reduce((s, e) => s + e.outside_delta, 0);

describe("GPT-2 attached after its second step (H200)", () => {
  const { model, at } = replayLedger(join(FX, "attach-gpt2.ring.gz"), manifestPath, samples);

  test("the recording: attached, torch had allocated before the first sample, whose NVML − reserved is the context and step 1's libraries", () => {
    expect(manifest.attached).not.toBeNull();
    expect(at.length).toBe(samples.length);
    expect(at[0]!.reserved).toBeGreaterThan(0);
    expect(beforeAttach).toBeGreaterThan(64 * MiB);
    expect(at[0]!.ledger.outside_pytorch_bytes).toBe(facts.context_bytes + beforeAttach);
  });

  test("the row says what it holds, never the bare context's name, and its note no figure of a context", () => {
    for (const a of at) {
      expect(sum(a.ledger.rows)).toBe(a.ledger.nvml_used_bytes);
      const ctx = a.ledger.rows.filter((r) => r.kind === "context");
      expect(ctx.length).toBe(1);
      expect(ctx[0]!.bytes).toBe(facts.context_bytes + beforeAttach);
      expect(ctx[0]!.name).not.toBe("CUDA context");
      expect(ctx[0]!.name).toContain("libraries loaded before the monitor saw the process");
      expect(ctx[0]!.note).toContain("when the monitor attached, after the program had run");
      expect(ctx[0]!.note).toContain("not told apart");
      expect(ctx[0]!.note).not.toMatch(/\d+(\.\d+)? [KMG]i?B/);
      // The words on the Process screen and in the finding name it so too.
      expect(ledgerWords(a.ledger)).not.toMatch(/CUDA context [\d.]+ MiB/);
    }
    // What came after the attach stays where it was: nothing was unexplained, nothing guessed.
    expect(at.at(-1)!.ledger.rows.find((r) => r.kind === "unexplained")!.bytes).toBe(0);
    expect(model.ledger.parts(0)!.context_late).toEqual({ attached: true, steps: 0 });
  });

  test("live: the monitor's model of an attached agent says so too", () => {
    const dir = mkdtempSync(join(tmpdir(), "gpumem-ledger-late-"));
    try {
      const ring = join(dir, `${facts.pid}.ring`);
      writeFileSync(ring, Bun.gunzipSync(readFileSync(join(FX, "attach-gpt2.ring.gz"))), { mode: 0o600 });
      const reader = openRing(ring, { fold: true });
      const agent: Agent = { pid: facts.pid, manifest: { ...manifest, ring, socket: null }, manifestStamp: "", ring: reader, header: reader.header(), exited: false, problem: null };
      const live = new LiveModels({ keepTrace: false });
      const last = samples.at(-1)!;
      // The ring's header as saved holds torch's figures of the recording's last document.
      expect(reader.header().totals[0]!.reserved).toBe(last.header!.reserved_bytes);
      live.update([agent], [{ agentPid: facts.pid, pid: facts.pid, cudaIndex: 0, nvmlIndex: 0, used_bytes: last.used_bytes }], last.time_us);
      const parts = live.byPid.get(facts.pid)!.model.ledger.parts(0)!;
      expect(parts.context_late?.attached).toBe(true);
      expect(parts.context_bytes).toBe(facts.context_bytes + beforeAttach);
      reader.close();
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});

describe("a process first seen by a run's monitor only after steps", () => {
  test("the recorded GPT-2 run as a monitor started after two steps saw it (its last three samples): the same honest row; from its first sample, the CUDA context", () => {
    const gpt2 = join(FX, "gpt2");
    const pid = JSON.parse(readFileSync(`${gpt2}.json`, "utf8")).pid as number;
    const all = documentSamples(`${gpt2}.run.ndjson.gz`, pid);
    const whole = replayLedger(`${gpt2}.ring.gz`, `${gpt2}.json`, all);
    expect(whole.at.at(-1)!.ledger.rows.find((r) => r.kind === "context")!.name).toBe("CUDA context");
    // The same run as a monitor started after its second step saw it: samples from then on.
    expect(whole.model.device(0)!.step).toBeGreaterThanOrEqual(2);
    const late = replayLedger(`${gpt2}.ring.gz`, `${gpt2}.json`, all.slice(all.length - 3));
    for (const a of late.at) {
      expect(sum(a.ledger.rows)).toBe(a.ledger.nvml_used_bytes);
      const ctx = a.ledger.rows.find((r) => r.kind === "context")!;
      expect(ctx.name).toContain("before the monitor saw the process");
      expect(ctx.note).toMatch(/^first seen after \d+ steps, torch's memory already allocated/);
    }
    expect(whole.model.ledger.parts(0)!.context_late).toBeNull();
    expect(late.model.ledger.parts(0)!.context_late).toEqual({ attached: false, steps: expect.any(Number) });
    expect(late.model.ledger.parts(0)!.context_late!.steps).toBeGreaterThanOrEqual(2);
  });
});
