// Issue 37: every finding that can cite the user's line cites the right one, checked against the
// program's own source (test/agent/lines_run.py's `line:NAME` marks): a program run on the doubles
// with the real agent and the hook's walker, its ring saved and replayed through the CLI.
import { afterAll, describe, expect } from "bun:test";
import { stacksTest } from "../support/native";
import { cleanLines, markedAt, recordLines, replayFinal } from "../support/lines-run";

afterAll(cleanLines);

/** "path:line" of a frame label "path:line function". */
const fileLine = (at: string | undefined) => at?.replace(/ [^ ]+$/, "");

describe("findings name the user's line (stacks on by default, recorded on the doubles)", () => {
  stacksTest("growth: the line that allocated the memory that stays, in the title, the evidence and lines", () => {
    const f = replayFinal(recordLines("leak")).findings.find((x) => x.id === "growth");
    const keep = markedAt("keep");
    expect(f?.title).toEndWith(`allocated at lines_run.py:${keep.split(":").at(-1)} <module>`);
    expect(f?.lines?.map((l) => [l.role, fileLine(l.at)])).toEqual([["grows", keep]]);
    // 2 MiB a step, every one kept since the first settled step
    expect(f?.lines?.[0]?.bytes).toBe(f?.numbers.site_bytes as number);
    expect(f?.evidence).toContain(`at ${keep} <module>`);
  }, 30_000);

  stacksTest("growth of a program that lets go of what it kept after its last step (its training function returned): still the line that made it, read at the last step boundary", () => {
    const f = replayFinal(recordLines("leak", {}, ["--drop"])).findings.find((x) => x.id === "growth");
    const keep = markedAt("keep");
    expect(f?.lines?.map((l) => [l.role, fileLine(l.at)])).toEqual([["grows", keep]]);
    // 2 MiB kept by each step after the window's first, held at its last step's end
    const n = (f?.numbers.last_step as number) - (f?.numbers.first_step as number);
    expect(n).toBeGreaterThan(4);
    expect([f?.numbers.site_blocks, f?.numbers.site_bytes]).toEqual([n, n * 2 ** 21]);
  }, 30_000);

  stacksTest("gradients kept: the line that calls backward and the one that calls the optimizer's step", () => {
    const f = replayFinal(recordLines("nograd")).findings.find((x) => x.id === "gradients_kept");
    expect(f?.lines?.map((l) => [l.role, fileLine(l.at)])).toEqual([
      ["backward", markedAt("backward")],
      ["optimizer", markedAt("optimizer")],
    ]);
    expect(f?.evidence).toContain(`the optimizer's step at ${markedAt("optimizer")} <module>: zero_grad() belongs after it`);
  }, 30_000);

  stacksTest("OOM: the line that asked, and the lines holding most at that moment, most first", () => {
    const f = replayFinal(recordLines("oom")).findings.find((x) => x.id === "oom");
    expect(f?.title).toEndWith(`asked at lines_run.py:${markedAt("ask").split(":").at(-1)} <module>`);
    const lines = f?.lines ?? [];
    expect(lines.map((l) => [l.role, fileLine(l.at)])).toEqual([
      ["asked", markedAt("ask")],
      // 6 × 4 MiB held, AdamW's two moments (4 + 1 + 1 MiB each), the parameters
      ["holding", markedAt("hold")],
      ["holding", markedAt("optimizer")],
      ["holding", markedAt("model")],
    ]);
    expect(lines.map((l) => l.bytes)).toEqual([4 * 2 ** 30, 24 * 2 ** 20, 12 * 2 ** 20, 6 * 2 ** 20]);
    expect(f?.numbers.asked_at).toBe(lines[0]!.at);
  }, 30_000);

  stacksTest("stacks off: no finding names a line, and none says it has lines", () => {
    for (const scenario of ["leak", "nograd", "oom"] as const) {
      const fs = replayFinal(recordLines(scenario, { GPUMEM_TUI_STACKS: "0" })).findings;
      expect(fs.length).toBeGreaterThan(0);
      for (const f of fs) {
        expect(f.lines).toBeUndefined();
        expect(`${f.title} ${f.evidence}`).not.toContain("lines_run.py");
      }
    }
  }, 60_000);
});
