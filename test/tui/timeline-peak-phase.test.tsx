// The Timeline's title says in which phase a step peaked as the model recorded it at the peak,
// whatever the terminal's width: the demo's steps (an H100 GPT-2 at 12 steps a second, whose
// peak falls in a column shared by backward's and the optimizer's records) read "in backward" at
// 80 and at 200 columns alike. (The phase of the chart column the peak fell in changed with it.)
import { expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { DEMO_RING } from "../../src/collect/demo";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, replay, steps } from "../../src/profiler";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { inPhase } from "../../src/tui/format";
import { until } from "../support/clock";

const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
const LEFT = "\x1b[D";

async function replayed(path: string) {
  const rec = openRingRecording(path);
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) {
    // to the end
  }
  rec.close();
  return { pid: 4242, model, source: "replay" as const, socket: null, title: "demo", ended: true };
}

/** Each step's title on the Timeline at a size, from the last complete step back to the oldest kept. */
async function titles(pm: Awaited<ReturnType<typeof replayed>>, columns: number, rows: number): Promise<Map<number, string>> {
  const ctl = new Controller(null, 1000);
  ctl.replay = pm;
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} initialScreen="timeline" />);
  // Narrow, the title gives up whose step it is before the peak's phase.
  const title = () => plain(ui.lastFrame() ?? "").split("\n").find((l) => /^(pid 4242 {2})?step \d+/.test(l)) ?? "";
  const out = new Map<number, string>();
  try {
    await until(() => title() !== "");
    for (;;) {
      const t = title();
      const step = Number(/step (\d+)/.exec(t)![1]);
      out.set(step, t);
      ui.stdin.write(LEFT);
      const moved = await until(() => title() !== t, 30).then(() => true, () => false);
      if (!moved) break;
    }
  } finally {
    ui.unmount();
  }
  return out;
}

test("the demo at 60×15, 80×24 and 200×60: each step's peak in the phase the model recorded at it, the same at every width", async () => {
  const pm = await replayed(DEMO_RING);
  const split = await titles(pm, 60, 15);
  const narrow = await titles(pm, 80, 24);
  const wide = await titles(pm, 200, 60);
  const recorded = new Map(steps(pm.model).steps.map((s) => [s.step, s.peak_phase]));
  expect(narrow.size).toBeGreaterThan(30);
  expect([...narrow.keys()]).toEqual([...wide.keys()]);
  expect([...split.keys()]).toEqual([...wide.keys()]);
  const phaseOf = (t: string) => / in (backward|forward|the optimizer)$| (outside forward, backward and the optimizer)$/.exec(t)?.slice(1).find(Boolean) ?? null;
  for (const [step, t] of narrow) {
    const p = recorded.get(step)!;
    expect({ step, narrow: t.endsWith(inPhase(p)), wide: wide.get(step)!.endsWith(inPhase(p)) }).toEqual({ step, narrow: true, wide: true });
    expect(phaseOf(t)).toBe(phaseOf(wide.get(step)!));
    expect({ step, split: split.get(step)! }).toEqual({ step, split: expect.stringMatching(new RegExp(`${inPhase(p)}$`)) });
  }
});
