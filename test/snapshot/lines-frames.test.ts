// Issue 37: a snapshot the monitor writes from a ring with the hook's stacks (`replay --snapshot`,
// and `d`, which writes through the same writeModelSnapshot) carries the user's frames: each live
// block and each alloc of the trace its stack's frames, an OOM the failed request's, as torch's own
// snapshots do; memory_viz opens it where a Python with torch is at hand. The rings are recorded on
// the doubles with the real agent and the hook's walker (test/agent/lines_run.py).
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { unpickle } from "../../src/snapshot/pickle";
import { stacksTest } from "../support/native";
import { cleanLines, cli, markedAt, recordLines } from "../support/lines-run";
import { TORCH_PYTHON_HINT, torchPython } from "../support/torch";

afterAll(cleanLines);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const dir = mkdtempSync(join(tmpdir(), "gpumem-lines-snap-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const at = (f: Any) => `${f.filename}:${f.line}`;

function snapshotOf(ring: string, name: string): { path: string; s: Any } {
  const path = join(dir, `${name}.pickle`);
  const r = cli(["replay", ring, "--snapshot", path]);
  expect(r.code).toBe(0);
  return { path, s: unpickle(new Uint8Array(readFileSync(path))) };
}

describe("snapshots written from a ring with stacks carry the user's frames", () => {
  stacksTest("the kept tensors: their blocks and their allocs in the trace name line:keep, after the double's frames", () => {
    const { s } = snapshotOf(recordLines("leak"), "leak");
    const keep = markedAt("keep");
    const blocks = s.segments.flatMap((g: Any) => g.blocks).filter((b: Any) => b.state === "active_allocated" && b.size === 2 * 2 ** 20);
    // ten steps, each keeping one
    expect(blocks.length).toBe(10);
    for (const b of blocks) expect(b.frames.map(at)).toContain(keep);
    const allocs = s.device_traces[0].filter((e: Any) => e.action === "alloc" && e.size === 2 * 2 ** 20);
    expect(allocs.length).toBe(10);
    for (const e of allocs) {
      // innermost first, as torch lists them: the double's frames, then the program's line, then the monitor's words
      const frames = e.frames.map(at);
      expect(frames.indexOf(keep)).toBeGreaterThan(0);
      expect(frames.at(-1)).toBe("gpumem-tui:0");
    }
  }, 30_000);

  stacksTest("the OOM's trace entry: the failed request's frames (line:ask), its device_free, no address", () => {
    const { s } = snapshotOf(recordLines("oom"), "oom");
    const ooms = s.device_traces[0].filter((e: Any) => e.action === "oom");
    expect(ooms.length).toBe(1);
    expect(ooms[0].frames.map(at)).toContain(markedAt("ask"));
    expect([ooms[0].addr, ooms[0].size, ooms[0].device_free]).toEqual([0, 4 * 2 ** 30, 64 * 2 ** 20]);
  }, 30_000);

  const torchPy = torchPython();
  // torch's text trace (_memory_viz.trace) names blocks and sizes, never frames (torch 2.11 on the
  // H200: the check of the line in it failed there); the plots carry the pickle whole, frames and
  // all. So: both plots drawn, and the trace entries torch loaded carry the line.
  (torchPy ? test : test.skip)(`torch.cuda._memory_viz draws it and the trace entries it loads carry the line${torchPy ? "" : ` (${TORCH_PYTHON_HINT})`}`, () => {
    const { path } = snapshotOf(recordLines("leak"), "leak-viz");
    const keep = Number(markedAt("keep").split(":").at(-1));
    const py = Bun.spawnSync([torchPy!, "-c", `import pickle, json, sys
from torch.cuda import _memory_viz as v
d = pickle.load(open(sys.argv[1], "rb"))
kept = sum(1 for e in d["device_traces"][0] if e["action"] == "alloc" and any(f["filename"].endswith("lines_run.py") and f["line"] == int(sys.argv[2]) for f in e["frames"]))
print(json.dumps({"trace": v.trace(d), "html": len(v.trace_plot(d)), "segments_html": len(v.segment_plot(d)), "kept": kept}))`, path, String(keep)], { stdout: "pipe", stderr: "pipe" });
    expect(py.stderr.toString()).toBe("");
    const r = JSON.parse(py.stdout.toString());
    expect(r.html).toBeGreaterThan(10_000);
    expect(r.segments_html).toBeGreaterThan(10_000);
    expect(r.trace).toContain(" = ");
    expect(r.kept).toBeGreaterThan(0);
  }, 60_000);
});
