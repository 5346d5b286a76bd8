// Issue 37, on a real recording: torch's own snapshot of an OOM on an H100, history on from the
// second step (test/fixtures/snapshots/oom, made by capture_snapshots.py): the OOM finding names the
// line that asked (the failed request's own frames) and the lines holding the most at that moment,
// checked against the program's source; what torch recorded no frames for (the parameters, made
// before the history began; the gradients, made by autograd's engine) is said as unknown.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const SCRIPT = readFileSync(join(DIR, "capture_snapshots.py"), "utf8").split("\n");
const lineOf = (code: string) => {
  const i = SCRIPT.findIndex((l) => l.includes(code));
  if (i < 0) throw new Error(`capture_snapshots.py has no line with ${code}`);
  return `capture_snapshots.py:${i + 1}`;
};

describe("view --json of the H100 OOM snapshot", () => {
  test("the OOM cites the line that asked for 16 TiB, then the model's forward and the optimizer's step as holding most", () => {
    const p = Bun.spawnSync(["bun", join(import.meta.dir, "..", "..", "src", "cli.ts"), "view", join(DIR, "oom.pickle.gz"), "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    const oom = JSON.parse(p.stdout.toString()).findings.find((f: { id: string }) => f.id === "oom");
    const lines = (oom.lines as { role: string; at: string; bytes: number }[]).map((l) => [l.role, l.at.replace(/^.*\//, "").replace(/ .*$/, "")]);
    expect(lines).toEqual([
      ["asked", lineOf("torch.empty(16 << 40")],
      ["holding", lineOf("out = model(input_ids=x, labels=x)")],
      ["holding", lineOf("opt.step()")],
    ]);
    expect(oom.title).toEndWith(`asked at ${lineOf("torch.empty(16 << 40")} child`);
    expect(oom.lines[0].bytes).toBe(16 * 2 ** 40);
    // the lines and the unknown add up to what was allocated then
    expect(oom.lines.slice(1).reduce((s: number, l: { bytes: number }) => s + l.bytes, 0) + oom.numbers.holding_unknown_bytes).toBe(oom.numbers.allocated_bytes);
  });
});
