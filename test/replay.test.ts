// `gpumem-tui replay FILE --json` on rings recorded from real training runs on an H100
// (test/fixtures/*.ring, with what torch reported at the end in *.facts.json).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

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

  test("--speed paces the replay by the recorded clock; without it, as fast as it goes", () => {
    const run = (extra: string[]) => {
      const t0 = performance.now();
      const p = Bun.spawnSync(["bun", CLI, "replay", join(FIXTURES, "oom.ring"), "--json", ...extra]);
      expect(p.exitCode).toBe(0);
      const lines = p.stdout.toString().trim().split("\n").map((l) => JSON.parse(l));
      return { ms: performance.now() - t0, spanMs: (lines.at(-1).time_us - lines[0].time_us) / 1000 };
    };
    const fast = run([]);
    // A speed at which the recording lasts 600 ms of wall time.
    const speed = fast.spanMs / 600;
    const paced = run(["--speed", String(speed)]);
    expect(paced.ms).toBeGreaterThanOrEqual(550);
    expect(paced.ms).toBeGreaterThan(fast.ms + 300);
  });
});
