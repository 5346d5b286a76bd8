// Issue 37 on GPU recordings: rings recorded on an H200 with no variable set (the hook's stacks on
// by default) by bench/gpu-parts/lines.sh, each program test/gpu/lines_train.py: replayed through
// the CLI, and read as a live agent's ring by the session `run --json` and `--json` make (no
// records kept), every finding that can cite a line cites the program's own, as its `line:NAME`
// marks say (the facts beside each ring, read from the source when it ran). test/fixtures/lines/
// holds them (bench/results/gpu-2026-11-29c/run2/lines/: the run that made them); GPUMEM_LINES_FIXTURES
// names another folder of the same files (lines.sh checks a fresh run's with this file).
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Machine } from "../../src/collect/machine";
import { Session } from "../../src/collect/session";
import { openRingRecording } from "../../src/collect/recording";
import { liveModels } from "../../src/commands/live-models";
import { replay, type Summary } from "../../src/profiler";
import { recordFields } from "../../src/system/manifest";
import { plantAgent } from "../support/planted-agent";

const DIR = process.env.GPUMEM_LINES_FIXTURES || join(import.meta.dir, "..", "fixtures", "lines");
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
/** A recording's facts (NAME.exit's are NAME's: the same program, its ring saved again at its end). */
const facts = (name: string) => JSON.parse(readFileSync(join(DIR, `${name.replace(/\.exit$/, "")}.facts.json`), "utf8"));
const ringTest = (name: string, title: string, fn: () => void) => (have(name) ? test(`${name}: ${title}`, fn, 60_000) : test.skip(`${name}: ${title} (no ${name}.ring.gz in ${DIR})`, fn));

function replayed(name: string): { findings: Finding[]; at: (mark: string) => string } {
  const p = Bun.spawnSync(["bun", CLI, "replay", join(DIR, `${name}.ring.gz`), "--json"], { stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode).toBe(0);
  const marks = facts(name).marks as { filename: string; lines: Record<string, number> };
  return { findings: JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!).findings, at: (mark) => `${marks.filename}:${marks.lines[mark]}` };
}

const sleeper = Bun.spawn(["sleep", "120"]);
const made: string[] = [];
afterAll(() => {
  sleeper.kill();
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

/** The recording as a live agent's ring (a `sleep` standing in for the program), read by the
 *  session `run --json` makes (liveModels without kept records): its findings in the document. */
function live(name: string): { findings: Finding[]; at: (mark: string) => string } {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-lines-live-"));
  made.push(dir);
  writeFileSync(join(dir, `${name}.ring`), Bun.gunzipSync(readFileSync(join(DIR, `${name}.ring.gz`))));
  copyFileSync(join(DIR, `${name}.json`), join(dir, `${name}.json`));
  const agents = join(dir, "agents");
  mkdirSync(agents, { mode: 0o700 });
  plantAgent(agents, sleeper.pid, {}, join(dir, name));
  const session = new Session(new Machine({ agentDir: agents }), liveModels({ keepTrace: false }));
  const doc = session.tick();
  session.close();
  const marks = facts(name).marks as { filename: string; lines: Record<string, number> };
  const profile = doc.processes.find((p) => p.agent_pid === sleeper.pid)!.pytorch!.profile!;
  return { findings: profile.findings as Finding[], at: (mark) => `${marks.filename}:${marks.lines[mark]}` };
}

/** The finding's lines as [role, "file:line"] (the function dropped). */
const lines = (f: Finding | undefined) => (f?.lines ?? []).map((l) => [l.role, l.at.replace(/ [^ ]+$/, "")]);

describe("an H200's recordings with the default stacks, replayed", () => {
  ringTest("leak", "growth names the line that made the logits it keeps", () => {
    const r = replayed("leak");
    expect(lines(r.findings.find((f) => f.id === "growth"))).toEqual([["grows", r.at("keep")]]);
  });

  ringTest("leak.exit", "its ring saved again once the training was let go (what run --json reads last): growth still names the line", () => {
    const r = replayed("leak.exit");
    expect(lines(r.findings.find((f) => f.id === "growth"))).toEqual([["grows", r.at("keep")]]);
  });

  ringTest("attach-leak", "attached while it trained: growth names the same line, from the attach on", () => {
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

  ringTest("frag", "holes of 200 MiB freed in a cached segment: reserved-unallocated names the pieces' line whose frees left them", () => {
    const r = replayed("frag");
    expect(lines(r.findings.find((f) => f.id === "reserved_unallocated"))[0]).toEqual(["freed", r.at("pieces")]);
  });

  // The program empties the cache before it caps the process, so its 400 MiB finds no segment to
  // free and only the holes: it raised OOM (facts.frag_ask_failed, torch's num_ooms).
  ringTest("frag", "the OOM no hole held names the line that asked", () => {
    expect(facts("frag").frag_ask_failed).toBe(true);
    const r = replayed("frag");
    expect(r.findings.filter((f) => f.id === "oom").map((f) => lines(f)[0])).toContainEqual(["asked", r.at("frag-ask")]);
  });

  ringTest("attach-leak", "with its seed: torch's peak from before the attach right after the seed (with its note), torch's peak at the end", async () => {
    const seed = JSON.parse(readFileSync(join(DIR, "attach-leak.seed.json"), "utf8")).devices[0];
    const rec = openRingRecording(join(DIR, "attach-leak.ring.gz"));
    try {
      expect(rec.seed).not.toBeNull();
      // a state every recorded microsecond: the first is the seed and the attach's first records
      const states: Summary[] = [];
      for await (const l of replay(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), stacks: rec.stacks, seed: rec.seed, state_every_us: 1 })) if (l.type === "state") states.push(l.summary);
      const first = states[0]!.devices[0]!;
      expect(first.peak_allocated_bytes).toBe(seed.peak_allocated);
      expect(first.peak_note).toStartWith("torch's max_memory_allocated(), reached before the agent attached; ");
      const end = states.at(-1)!.devices[0]!;
      expect(end.peak_allocated_bytes).toBe(facts("attach-leak").max_memory_allocated);
      expect(end.peak_reserved_bytes).toBe(facts("attach-leak").max_memory_reserved);
      expect(end.peak_note).toBeNull(); // reached again since the attach
    } finally {
      rec.close();
    }
  });
});

describe("an H200's recordings read as a live agent's ring by run --json's session (no records kept)", () => {
  ringTest("leak", "growth names the line that made the logits it keeps", () => {
    const r = live("leak");
    expect(lines(r.findings.find((f) => f.id === "growth"))).toEqual([["grows", r.at("keep")]]);
  });

  ringTest("leak.exit", "the ring at the run's end, the training let go: growth still names the line", () => {
    const r = live("leak.exit");
    expect(lines(r.findings.find((f) => f.id === "growth"))).toEqual([["grows", r.at("keep")]]);
  });

  ringTest("frag", "reserved-unallocated names the pieces' line whose frees left the holes, from the newest large frees", () => {
    const r = live("frag");
    expect(lines(r.findings.find((f) => f.id === "reserved_unallocated"))[0]).toEqual(["freed", r.at("pieces")]);
  });

  ringTest("frag", "the OOM no hole held names the line that asked", () => {
    const r = live("frag");
    expect(r.findings.filter((f) => f.id === "oom").map((f) => lines(f)[0])).toContainEqual(["asked", r.at("frag-ask")]);
  });

  ringTest("oom", "the OOM names the line that asked and the 24 GiB held", () => {
    const r = live("oom");
    const asked = r.findings.filter((f) => f.id === "oom").find((f) => lines(f)[0]?.[1] === r.at("ask"));
    expect(lines(asked)[1]).toEqual(["holding", r.at("hold")]);
  });
});
