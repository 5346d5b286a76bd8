// The demo as a newcomer without a GPU gets it: a recording replayed at its own pace with the NVML
// track beside it, so the Overview shows the GPU it was recorded on and the process row, marked as
// recorded, and Enter opens the process (test/support/demo.ts makes the recording).
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { rmSync } from "node:fs";
import { dirname } from "node:path";
import { steppedClock, until } from "../support/clock";
import { DEMO_PID as PID, makeDemo } from "../support/demo";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { demoStarter } from "../../src/tui/main";

const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

describe("the demo", () => {
  test("the Overview shows the recorded GPU and the process, paced like the run; Enter opens the process", async () => {
    const ring = makeDemo();
    const ctl = new Controller(null, 100);
    // The replay's clock is the test's: the pace is read off what it waited, not off the wall.
    const clock = steppedClock();
    const demo = demoStarter(ctl, { speed: 1, ring, clock });
    demo.start();
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 120, rows: 40 }} onDemo={demo.start} />);
    const frame = () => plain(ui.lastFrame()!);
    const step = () => ctl.replay!.model.devices[0]?.step ?? -1;
    // The monitor's tick (its own timer is not started here): the recorded machine follows the replay.
    const advance = async (us: number) => (await clock.advance(us), ctl.tick());
    try {
      expect(ctl.status).toBe("demo: a training run recorded on an H100, replayed at 1× (1 Overview, 2 Process, 3 Tensors and 4 Segments)");
      // Steps arrive as they were recorded: half a second in, some steps and not all 38.
      await advance(500_000);
      expect(step()).toBeGreaterThanOrEqual(1);
      expect(step()).toBeLessThan(38);
      await until(() => frame().split("\n").some((l) => l.startsWith(`${PID} `)));
      const f = frame();
      expect(f).toContain("GPU 0 [recorded] NVIDIA H100 80GB HBM3");
      expect(f).not.toContain("No GPU here");
      expect(f).not.toContain("no GPU processes");
      const row = f.split("\n").find((l) => l.startsWith(`${PID} `))!;
      expect(row).toContain("[recorded] hf_gpt2.py");
      expect(row).toMatch(/GiB/); // NVML's memory of the process, and the replay's allocated and reserved
      expect(row).toMatch(/ (forward|backward|optimizer|other) /);
      // The whole second of steps takes about a second of the replay's clock (1×), not 0.1 s.
      let at = 500_000;
      while (!ctl.replay!.ended && at < 5_000_000) (await advance(100_000), (at += 100_000));
      expect(ctl.replay!.ended).toBe(true);
      expect(at).toBeGreaterThan(800_000);
      expect(ctl.replay!.model.devices[0]!.step).toBe(38);
      // The GPU chart has a point per track sample passed.
      expect(ctl.overview().history.get(0)!.util.length).toBeGreaterThanOrEqual(3);
      // The recorded row is a process of the machine the run was recorded on: nothing to stop.
      ui.stdin.write("k");
      await until(() => ctl.status.startsWith("k: "));
      expect(ctl.status).toBe(`k: pid ${PID} is a recording: there is no process to stop`);
      ui.stdin.write("\r");
      await until(() => frame().includes("[2 Process]"));
      expect(frame()).toContain(`pid ${PID} [replay finished] recording of test/gpu/hf_gpt2.py`);
    } finally {
      demo.stop();
      ui.unmount();
      rmSync(dirname(ring), { recursive: true, force: true });
    }
  });

  test("across the demo's loop the Tensors screen keeps the last run's blocks until the next run has its own", async () => {
    const ring = makeDemo();
    const ctl = new Controller(null, 100);
    const clock = steppedClock();
    const demo = demoStarter(ctl, { speed: 1, ring, clock });
    demo.start();
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 120, rows: 40 }} onDemo={demo.start} />);
    const advance = async (us: number) => (await clock.advance(us), ctl.tick());
    try {
      ui.stdin.write("3");
      let at = 0;
      while (ctl.replay!.model.devices.length === 0 && at < 2_000_000) (await advance(100_000), (at += 100_000));
      // Through the first run's end, the pause before the next and the next's first states.
      const empty: number[] = [];
      for (let k = 0; k < 80; k++) {
        await advance(100_000);
        at += 100_000;
        if (ctl.replay!.model.devices.length === 0 || plain(ui.lastFrame()!).includes("No PyTorch process")) empty.push(at);
      }
      expect(empty).toEqual([]);
    } finally {
      demo.stop();
      ui.unmount();
      rmSync(dirname(ring), { recursive: true, force: true });
    }
  });

  test("a recording with no track: no recorded machine, and the status line does not promise the Overview", async () => {
    const ring = makeDemo({ withTrack: false });
    const ctl = new Controller(null, 100);
    ctl.doc = null;
    const demo = demoStarter(ctl, { speed: 1, ring });
    demo.start();
    expect(ctl.recorded).toBeNull();
    expect(ctl.status).toBe("demo: a training run recorded on a GPU, replayed at 1× (2 Process, 3 Tensors and 4 Segments)");
    demo.stop();
    rmSync(dirname(ring), { recursive: true, force: true });
  });
});
