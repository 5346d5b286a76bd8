// The phase band and OOM marks under the Process chart, from a ring recorded on an H100.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { openRing } from "../../src/ffi/ring";
import { createModel, oomColumns, phaseBands, replay, summary } from "../../src/profiler";

async function model(name: string, keep: boolean) {
  const dir = join(import.meta.dir, "..", "fixtures");
  const manifest = await Bun.file(join(dir, `${name}.json`)).json();
  const r = openRing(join(dir, `${name}.ring`));
  const m = keep ? createModel().keepTrace() : createModel();
  for await (const _ of replay(r, { ranges: manifest.ranges, model: m })) {
  }
  r.close();
  return m;
}

test("over the training steps, forward, backward and the optimizer each name columns, in that order within a step", async () => {
  const m = await model("normal", true);
  const s = summary(m).devices[0]!;
  const from = s.first_time_us!;
  const to = s.last_time_us!;
  // The last half second holds the steps (the model is built seconds before).
  const bands = [...phaseBands(m, 0, to - 500_000, to, 200)];
  for (const p of [1, 2, 3]) expect(bands).toContain(p);
  const firstF = bands.indexOf(1);
  expect(bands.indexOf(2, firstF)).toBeGreaterThan(firstF);
  expect(bands.indexOf(3, bands.indexOf(2, firstF))).toBeGreaterThan(firstF);
  // A model that keeps no records has no band to show: blank, not made up.
  expect([...phaseBands(await model("normal", false), 0, from, to, 50)].every((p) => p === -1)).toBe(true);
});

test("the OOM falls in the column of its time", async () => {
  const m = await model("oom", true);
  const s = summary(m).devices[0]!;
  const cols = oomColumns(m, 0, s.first_time_us!, s.last_time_us!, 100);
  expect(cols).toHaveLength(1);
  expect(cols[0]).toBeGreaterThan(90); // the OOM ends the run
  expect(oomColumns(m, 0, s.first_time_us!, s.first_time_us! + 1, 100)).toEqual([]);
});
