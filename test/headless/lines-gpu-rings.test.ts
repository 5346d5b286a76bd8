// Issue 37 on GPU recordings: rings recorded on an H200 with no variable set (the hook's stacks on
// by default) by bench/gpu-parts/lines.sh, each program test/gpu/lines_train.py: replayed through
// the CLI, every finding that can cite a line cites the program's own, as its `line:NAME` marks say
// (the facts beside each ring, read from the source when it ran). test/fixtures/lines/ holds them.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const DIR = join(import.meta.dir, "..", "fixtures", "lines");
const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");

interface Line {
  role: string;
  at: string;
  bytes: number | null;
}
interface Finding {
  id: string;
  title: string;
  lines?: Line[];
  numbers: Record<string, unknown>;
}

const have = (name: string) => existsSync(join(DIR, `${name}.ring.gz`));
const ringTest = (name: string, title: string, fn: () => void) => (have(name) ? test(`${name}: ${title}`, fn, 60_000) : test.skip(`${name}: ${title} (no test/fixtures/lines/${name}.ring.gz)`, fn));

function replayed(name: string): { findings: Finding[]; at: (mark: string) => string } {
  const p = Bun.spawnSync(["bun", CLI, "replay", join(DIR, `${name}.ring.gz`), "--json"], { stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode).toBe(0);
  const marks = JSON.parse(readFileSync(join(DIR, `${name}.facts.json`), "utf8")).marks as { filename: string; lines: Record<string, number> };
  return { findings: JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!).findings, at: (mark) => `${marks.filename}:${marks.lines[mark]}` };
}

/** The finding's lines as [role, "file:line"] (the function dropped). */
const lines = (f: Finding | undefined) => (f?.lines ?? []).map((l) => [l.role, l.at.replace(/ [^ ]+$/, "")]);

describe("an H200's recordings with the default stacks, replayed", () => {
  ringTest("leak", "growth names the line that made the logits it keeps", () => {
    const r = replayed("leak");
    expect(lines(r.findings.find((f) => f.id === "growth"))).toEqual([["grows", r.at("keep")]]);
  });

  ringTest("attach-leak", "attached after its first step: growth names the same line, from the attach on", () => {
    const r = replayed("attach-leak");
    expect(lines(r.findings.find((f) => f.id === "growth"))).toEqual([["grows", r.at("keep")]]);
  });

  ringTest("nograd", "a ResNet50 without zero_grad: gradients kept names backward's line and the optimizer's", () => {
    const r = replayed("nograd");
    expect(lines(r.findings.find((f) => f.id === "gradients_kept"))).toEqual([
      ["backward", r.at("resnet-backward")],
      ["optimizer", r.at("resnet-optimizer")],
    ]);
  });

  ringTest("oom", "the OOM names the line that asked and, first among those holding most, the 24 GiB held", () => {
    const r = replayed("oom");
    const asked = r.findings.filter((f) => f.id === "oom").find((f) => lines(f)[0]?.[1] === r.at("ask"));
    expect(asked).toBeDefined();
    expect(lines(asked)[1]).toEqual(["holding", r.at("hold")]);
  });

  ringTest("frag", "a fragmented OOM: its line, and reserved-unallocated the pieces' line whose frees left the holes", () => {
    const r = replayed("frag");
    expect(r.findings.filter((f) => f.id === "oom").map((f) => lines(f)[0])).toContainEqual(["asked", r.at("frag-ask")]);
    expect(lines(r.findings.find((f) => f.id === "reserved_unallocated"))[0]).toEqual(["freed", r.at("pieces")]);
  });
});
