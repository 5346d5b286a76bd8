#!/usr/bin/env bun
// A follower's tick taken apart, for trees side by side: one simulated busy rank replays
// test/fixtures/hf-gpt2.ring at its recorded rate (bench/support/busy-agents.ts, on the cores past
// the first), and for each TREE a process on core 0 runs that tree's sampling session as `--json`
// (MODE json: no trace kept) or the screens (MODE screens: the trace kept, the screens' document)
// make it, once a second, without drawing: each tick's milliseconds, of them the models' update,
// of that the model's ingest (and its ns a record), and the document (the tick less the update).
// Medians over the ticks after the third.
//   bun bench/follow-ticks.ts SECONDS MODE TREE...
import { agentDir, recordedRate, startWriters } from "./support/busy-agents";

if (process.argv[2] === "--one") {
  // one tree's follower (the child)
  const [, tree, dir, secs, mode] = process.argv.slice(2);
  const { Machine } = await import(`${tree}/src/collect/machine.ts`);
  const { Session } = await import(`${tree}/src/collect/session.ts`);
  const { liveModels } = await import(`${tree}/src/commands/live-models.ts`);
  const { ProfilerModel } = await import(`${tree}/src/profiler/model.ts`);
  const screens = mode === "screens";
  const session = new Session(new Machine({ agentDir: dir }), liveModels({ keepTrace: screens, screens }));
  let ingestMs = 0;
  let ingested = 0;
  const ingest = ProfilerModel.prototype.ingest;
  ProfilerModel.prototype.ingest = function (this: unknown, batch: { count: number }, lost = 0, start = 0, end = batch.count) {
    const t = performance.now();
    ingest.call(this, batch, lost, start, end);
    ingestMs += performance.now() - t;
    ingested += end - start;
  };
  let updateMs = 0;
  let wrapped = false;
  const rows: number[][] = [];
  for (let i = 0; i < Number(secs); i++) {
    const [u0, i0, n0] = [updateMs, ingestMs, ingested];
    const t0 = performance.now();
    session.tick();
    if (!wrapped && session.machine.lastAgents.length > 0) {
      // the models exist from the first agent on: their update timed from the next tick
      const models = session.models;
      const update = models.update.bind(models);
      models.update = (...a: Parameters<typeof update>) => {
        const t = performance.now();
        update(...a);
        updateMs += performance.now() - t;
      };
      wrapped = true;
    }
    const tick = performance.now() - t0;
    rows.push([tick, updateMs - u0, ingestMs - i0, ingested > n0 ? ((ingestMs - i0) * 1e6) / (ingested - n0) : 0, tick - (updateMs - u0)]);
    // SERIES=1: each tick's row on stderr (how the ingest's cost falls as the engine compiles)
    if (process.env.SERIES) console.error(`${i} ${rows[rows.length - 1]!.map((v) => v.toFixed(2)).join(" ")} ${ingested - n0}`);
    await Bun.sleep(Math.max(0, 1000 - tick));
  }
  const med = (k: number) => {
    const v = rows.slice(3).map((r) => r[k]!).sort((a, b) => a - b);
    return v[v.length >> 1]!.toFixed(2);
  };
  console.log(`${tree} ${mode}: a tick ${med(0)} ms: the update ${med(1)} (the ingest ${med(2)}, ${med(3)} ns a record), the document ${med(4)} (medians of ${rows.length - 3} ticks)`);
  process.exit(0);
}

const [secsArg, mode = "json", ...trees] = process.argv.slice(2);
if (!secsArg || trees.length === 0 || (mode !== "json" && mode !== "screens")) {
  process.stderr.write("usage: bun bench/follow-ticks.ts SECONDS json|screens TREE...\n");
  process.exit(2);
}
const FIXTURE = `${import.meta.dir}/../test/fixtures/hf-gpt2.ring`;
const dir = agentDir();
const cores = navigator.hardwareConcurrency;
// AGENTS, RATE: that many simulated ranks at that many records a second each (default: one at the
// recording's own rate)
const agents = Number(process.env.AGENTS ?? 1);
const rate = Number(process.env.RATE) || Math.round(recordedRate(FIXTURE));
const stop = startWriters(dir, agents, FIXTURE, rate, Number(secsArg) + 10, cores > 1 ? `1-${cores - 1}` : null);
await Bun.sleep(1500);
const pin = cores > 1 && Bun.which("taskset") ? ["taskset", "-c", "0"] : [];
const kids = trees.map((t) => Bun.spawn([...pin, process.execPath, import.meta.path, "--one", t, dir, secsArg, mode], { stdout: "inherit", stderr: "inherit" }));
await Promise.all(kids.map((k) => k.exited));
stop();
