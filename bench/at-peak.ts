// Switching the Tensors and Process screens to a peak or to a past step, against drawing now, in
// one run: the demo (a GPT-2 run recorded on an H100, replayed to its end as the monitor replays
// it) and a generated snapshot of about 1 GB (tools/snapshot-gen.ts, as bench/snapshot-view.ts
// makes it). And what keeping the past costs: the log of frees a live process's model holds for
// its last 8 steps, per step; and the model's ingest with the log and without it (the same batch,
// interleaved).
//   bun bench/at-peak.ts [OUT_DIR] [--mib N]
import { mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEMO_RING } from "../src/collect/demo";
import type { ProcessModel } from "../src/collect/live";
import { openRingRecording } from "../src/collect/recording";
import { breakdown, createModel, MAX_STEPS, PEAK_STEPS_KEPT, replayToEnd, type ProfilerModel } from "../src/profiler";
import { readSnapshotFile } from "../src/snapshot/read";
import { snapshotModel } from "../src/snapshot/view";
import type { TensorsMoment } from "../src/tui/moment";
import { tensorsLayout } from "../src/tui/screens/tensors";
import { writeBigSnapshot } from "../tools/snapshot-gen";

const args = process.argv.slice(2);
const mibAt = args.indexOf("--mib");
const mib = mibAt >= 0 ? Number(args.splice(mibAt, 2)[1]) : 1024;
const outDir = args[0] ?? join(import.meta.dir, "results");
mkdirSync(outDir, { recursive: true });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function demoModel(keep: number): ProfilerModel {
  const rec = openRingRecording(DEMO_RING);
  try {
    return replayToEnd(rec.source, { ranges: rec.ranges, names: rec.names, model: createModel().keepTrace().keepPeaks(keep) });
  } finally {
    rec.close();
  }
}

/** Median ms of drawing the Tensors table's layout at each moment (and Process's table at a past
 *  step), first call and again; `now` is the baseline the others are read against. */
function switches(m: ProfilerModel, runs: number) {
  const pm = { pid: 1, model: m, source: "replay", socket: null, title: "bench", ended: true } as ProcessModel;
  const d = m.devices[0]!;
  const kept = d.peaks.steps();
  const past = kept.at(-1)!;
  const old = kept[0]!;
  const moments: [string, TensorsMoment][] = [
    ["now", { kind: "now" }],
    ["the running step's peak", { kind: "peak", which: "step" }],
    ["the run's peak", { kind: "peak", which: "run" }],
    [`the end of step ${past}`, { kind: "end", step: past }],
    [`step ${old}'s peak (oldest kept)`, { kind: "peak", which: old }],
  ];
  const rows = moments.map(([label, moment]) => {
    const t: number[] = [];
    let n = 0;
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      n = tensorsLayout(pm, 50, "size", false, "", 0, [], false, moment).rows.length;
      t.push(performance.now() - t0);
    }
    return { label, ms: median(t), rows: n };
  });
  const tb: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    breakdown(m, { device: d.device, step: past });
    tb.push(performance.now() - t0);
  }
  return { rows, process_ms: median(tb), steps_kept: kept.length };
}

// 1. The demo, as the monitor replays it (every step kept), and as a live process keeps it.
const demo = demoModel(MAX_STEPS);
const demoSwitch = switches(demo, 30);
const live = demoModel(PEAK_STEPS_KEPT);
const ld = live.devices[0]!;
const held = ld.peaks.held();
const stepsSeen = ld.steps.length;
// 2. A generated snapshot of about `mib` MiB.
const file = join(tmpdir(), `gpumem-bench-at-peak-${mib}mib.pickle`);
writeBigSnapshot(file, mib * 2 ** 20);
const fileBytes = statSync(file).size;
const t0 = performance.now();
const parsed = await readSnapshotFile(file);
const { model: snap } = snapshotModel(parsed);
const openS = (performance.now() - t0) / 1000;
rmSync(file, { force: true });
const snapSwitch = switches(snap, 5);

const fmt = (r: { label: string; ms: number; rows: number }, base: number) => `| ${r.label} | ${r.ms.toFixed(2)} | ${(r.ms / base).toFixed(2)}× | ${r.rows} |`;
const table = (s: ReturnType<typeof switches>) => [
  "| moment | ms (median) | vs now | rows |",
  "| --- | ---: | ---: | ---: |",
  ...s.rows.map((r) => fmt(r, s.rows[0]!.ms)),
  `| Process table of the last finished step | ${s.process_ms.toFixed(2)} | | |`,
];
const md = [
  "# At the peak and in the past: switching, and what the past costs",
  "",
  `Command: \`bun bench/at-peak.ts --mib ${mib}\` (${new Date().toISOString()}, ${process.platform}-${process.arch}, bun ${Bun.version}).`,
  "The Tensors screen's layout (every block at that moment, grouped and sorted, as drawn) at each moment, median of repeated calls.",
  "",
  `## The demo (demo/demo.ring.gz replayed to its end, ${demoSwitch.steps_kept} steps' blocks kept)`,
  "",
  ...table(demoSwitch),
  "",
  `## A generated snapshot: ${(fileBytes / 2 ** 20).toFixed(0)} MiB (opened in ${openS.toFixed(1)} s, ${snapSwitch.steps_kept} steps' blocks kept)`,
  "",
  ...table(snapSwitch),
  "",
  "## What a live process's model keeps for the past",
  "",
  `The demo replayed as a live process keeps it (the last ${PEAK_STEPS_KEPT} steps): the log of frees holds ${held.rows} rows in ${(held.bytes / 2 ** 20).toFixed(2)} MiB of columns after ${stepsSeen} steps, some ${((held.bytes / PEAK_STEPS_KEPT) / 1024).toFixed(0)} KiB a step kept; the README's bound is 54 bytes for each block freed in those steps.`,
  "",
].join("\n");
writeFileSync(join(outDir, "at-peak.md"), md);
writeFileSync(join(outDir, "at-peak.json"), JSON.stringify({ mib, file_bytes: fileBytes, open_s: openS, demo: demoSwitch, snapshot: snapSwitch, live_log: { ...held, steps: stepsSeen, kept: PEAK_STEPS_KEPT } }, null, 1));
console.log(md);
