// The demo as a newcomer without a GPU gets it: a recording replayed at its own pace with the NVML
// track beside it, so the Overview shows the GPU it was recorded on and the process row, marked as
// recorded, and Enter opens the process. The recording is a GPT-2 training recorded on an H200
// (hf-gpt2.ring, 1 s of steps); the track is made of the documents an H100 gave while a GPT-2
// training started (h100-nvml.ndjson), re-timed onto the ring's clock and renamed to its pid: what
// is tested is the player, the alignment and the screens, not that pairing.
import { afterAll, describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DocumentSchema } from "../../src/system/schema";
import { trackFromDocuments, trackText } from "../../src/system/recorded";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { demoStarter } from "../../src/tui/demo";

const FIX = join(import.meta.dir, "..", "fixtures");
const RING_FIRST_US = 1795411480497295; // hf-gpt2.ring's first record
const PID = 2915; // hf-gpt2.json's pid
const dir = mkdtempSync(join(tmpdir(), "gpumem-demo-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function makeDemo(): string {
  for (const [from, to] of [["hf-gpt2.ring", "demo.ring"], ["hf-gpt2.json", "demo.json"], ["hf-gpt2.names.json", "demo.names.json"]]) copyFileSync(join(FIX, from!), join(dir, to!));
  const docs = readFileSync(join(FIX, "h100-nvml.ndjson"), "utf8").trim().split("\n").map((l) => DocumentSchema.parse(JSON.parse(l)));
  // The process appeared at the third document: that moment is the ring's first record.
  const shiftMs = RING_FIRST_US / 1000 - docs[2]!.time_unix_ms;
  const moved = docs.map((d) => ({ ...d, time_unix_ms: d.time_unix_ms + shiftMs, processes: d.processes.map((p) => ({ ...p, pid: PID, agent_pid: PID })) }));
  const track = trackFromDocuments(moved, { pid: PID, from_us: 0, to_us: Infinity, every_ms: 250, device: 0 });
  writeFileSync(join(dir, "demo.nvml.ndjson"), trackText(track));
  return join(dir, "demo.ring");
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

describe("the demo", () => {
  test("the Overview shows the recorded GPU and the process, paced like the run; Enter opens the process", async () => {
    const ring = makeDemo();
    const ctl = new Controller(null, 100);
    const demo = demoStarter(ctl, { speed: 1, ring });
    const t0 = performance.now();
    demo.start();
    ctl.start();
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 120, rows: 40 }} onDemo={demo.start} />);
    const frame = () => plain(ui.lastFrame()!);
    try {
      expect(ctl.status).toBe("demo: a training run recorded on an H100, replayed at 1× (1 Overview, 2 Process, 3 Tensors, 4 Segments)");
      // Steps arrive as they were recorded: a few hundred ms in, some steps and not all 38.
      let step = -1;
      while (performance.now() - t0 < 3000 && step < 1) {
        await sleep(50);
        step = ctl.replay!.model.devices[0]?.step ?? -1;
      }
      const early = performance.now() - t0;
      expect(step).toBeGreaterThanOrEqual(1);
      expect(ctl.replay!.ended).toBe(false);
      expect(step).toBeLessThan(38);
      await sleep(150);
      const f = frame();
      expect(f).toContain("GPU 0 [recorded] NVIDIA H100 80GB HBM3");
      expect(f).not.toContain("No GPU here");
      expect(f).not.toContain("no GPU processes");
      const row = f.split("\n").find((l) => l.startsWith(`${PID} `))!;
      expect(row).toContain("[recorded] python3 test/gpu/hf_gpt2");
      expect(row).toMatch(/GiB/); // NVML's memory of the process, and the replay's allocated and reserved
      expect(row).toMatch(/ (forward|backward|optimizer|other) /);
      // The whole second of steps takes about a second on the wall (1×), not 0.1 s.
      while (!ctl.replay!.ended && performance.now() - t0 < 5000) await sleep(50);
      const whole = performance.now() - t0;
      expect(whole).toBeGreaterThan(800);
      expect(whole - early).toBeGreaterThan(300);
      expect(ctl.replay!.model.devices[0]!.step).toBe(38);
      // The GPU chart has a point per track sample passed.
      expect(ctl.overview().history.get(0)!.util.length).toBeGreaterThanOrEqual(3);
      ui.stdin.write("\r");
      await sleep(100);
      expect(frame()).toContain("[2 Process]");
      expect(frame()).toContain(`pid ${PID} [replay finished] recording of test/gpu/hf_gpt2.py`);
    } finally {
      ctl.stop();
      demo.stop();
      ui.unmount();
    }
  }, 15_000);

  test("a recording with no track: no recorded machine, and the status line does not promise the Overview", async () => {
    const ring = makeDemo();
    rmSync(join(dir, "demo.nvml.ndjson"));
    const ctl = new Controller(null, 100);
    ctl.doc = null;
    const demo = demoStarter(ctl, { speed: 1, ring });
    demo.start();
    expect(ctl.recorded).toBeNull();
    expect(ctl.status).toBe("demo: a training run recorded on a GPU, replayed at 1× (2 Process, 3 Tensors, 4 Segments)");
    demo.stop();
  });
});
