// `gpumem-tui replay FILE --json` on rings recorded from real training runs on an H100
// (test/fixtures/*.ring, with what torch reported at the end in *.facts.json).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openRingRecording } from "../src/collect/recording";
import { replayJson } from "../src/headless/replay";

const FIXTURES = join(import.meta.dir, "fixtures");
const CLI = join(import.meta.dir, "..", "src", "cli.ts");

function replay(name: string) {
  const p = Bun.spawnSync(["bun", CLI, "replay", join(FIXTURES, `${name}.ring`), "--json"], { stdout: "pipe", stderr: "pipe" });
  expect(p.stderr.toString()).toBe("");
  expect(p.exitCode).toBe(0);
  const lines = p.stdout.toString().trim().split("\n").map((l) => JSON.parse(l));
  const facts = JSON.parse(readFileSync(join(FIXTURES, `${name}.facts.json`), "utf8"));
  return { lines, final: lines.at(-1), facts };
}

describe("replay of recorded training runs", () => {
  for (const [name, expected] of [
    ["normal", []],
    ["no-zero-grad", ["gradients_kept"]],
    ["kept-loss-graph", ["growth"]],
    ["oom", ["oom"]],
  ] as const) {
    test(`${name}: final totals are torch's; findings: ${expected.join(", ") || "none"}`, () => {
      const { lines, final, facts } = replay(name);
      expect(final.type).toBe("final");
      expect(lines.slice(0, -1).every((l) => l.type === "state")).toBe(true);
      expect(final.events).toBe(facts.records);
      const d = final.summary.devices[0];
      expect(d.allocated_bytes).toBe(facts.memory_allocated);
      expect(d.reserved_bytes).toBe(facts.memory_reserved);
      expect(d.peak_allocated_bytes).toBe(facts.max_memory_allocated);
      expect(final.lost_records).toBe(0);
      expect(final.findings.map((f: { id: string }) => f.id)).toEqual([...expected]);
      // One step line per optimizer step taken, plus the step in progress at the end.
      expect(final.devices[0].steps.length).toBe(facts.steps + 1);
    });
  }

  test("the OOM incident carries the request and the free bytes the hook recorded", () => {
    const { final } = replay("oom");
    const oom = final.findings.find((f: { id: string }) => f.id === "oom");
    expect(JSON.stringify(oom)).toContain(String(2 ** 44));
  });

  test("--speed paces the replay by the recorded clock; without it, as fast as it goes", async () => {
    // `replay --json` in this process, on a clock whose time moves only by what the replay waits.
    const run = async (speed?: number) => {
      const clock = { t: 0, now_us: () => clock.t, sleep: async (us: number) => void (clock.t += us) };
      const out: string[] = [];
      const write = process.stdout.write;
      process.stdout.write = ((s: string) => (out.push(s), true)) as typeof process.stdout.write;
      const rec = openRingRecording(join(FIXTURES, "oom.ring"));
      try {
        await replayJson(rec, { speed, clock });
      } finally {
        process.stdout.write = write;
        rec.close();
      }
      const lines = out.join("").trim().split("\n").map((l) => JSON.parse(l));
      return { waitedUs: clock.t, spanUs: lines.at(-1).time_us - lines[0].time_us, final: lines.at(-1) };
    };
    const fast = await run();
    expect(fast.waitedUs).toBe(0);
    for (const speed of [1, 4]) {
      const paced = await run(speed);
      // The recording's span at `speed` times its pace (to a state's interval), and the same end.
      expect(paced.waitedUs).toBeGreaterThan((fast.spanUs / speed) * 0.9);
      expect(paced.waitedUs).toBeLessThan((fast.spanUs / speed) * 1.1 + 100_000);
      expect(paced.final.summary).toEqual(fast.final.summary);
    }
  });
});
