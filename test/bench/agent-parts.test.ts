// The agent-overhead benchmarks where no GPU is: bench/agent_parts.py refuses in one line without
// torch or with a bad part, and both scripts' --render turn a run's JSON into the tables: each
// part's paired difference as a share of its step, a part that could not be switched said as
// such, and agent_overhead_gpt2.py's differences paired by repetition. The measurement itself runs
// on the GPU (BENCHMARKS.md, "Which part costs").
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const PARTS = join(ROOT, "bench", "agent_parts.py");
const GPT2 = join(ROOT, "bench", "agent_overhead_gpt2.py");
const dir = mkdtempSync(join(tmpdir(), "gpumem-agent-parts-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// -S: no site-packages, so no torch even where one is installed
function py(args: string[]) {
  const p = Bun.spawnSync(["python3", "-S", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (i: number) => s[i] ?? Number.NaN;
  return s.length % 2 ? at((s.length - 1) / 2) : (at(s.length / 2 - 1) + at(s.length / 2)) / 2;
};

describe("bench/agent_parts.py", () => {
  test("without torch: exit 2, one line, nothing written", () => {
    const r = py([PARTS, join(dir, "none")]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toEqual([expect.stringContaining("agent_parts: needs torch and transformers")]);
    expect(existsSync(join(dir, "none"))).toBe(false);
  });

  test("an unknown part: exit 2, the known ones listed", () => {
    const r = py([PARTS, join(dir, "bad"), "--parts", "tracker,nonsense"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown part or workload nonsense");
    expect(r.stderr).toContain("global-module-hooks");
  });

  test("--render: Δ and its share of the step per part; an unswitchable part said, not dropped", () => {
    const wall = { n: 16, on_ms: 9.5, off_ms: 9.3, median: 0.2, q1: 0.1, q3: 0.3, median_ci: [0.1, 0.3], mean: 0.25, mean_ci: [0.15, 0.35], pct: (100 * 0.2) / 9.3, mean_pct: (100 * 0.25) / 9.3 };
    const run = {
      command: "python3 bench/agent_parts.py OUT", date: "2026-01-01T00:00:00Z", torch: "2.11", transformers: "5.17", gpu: "H100",
      workloads: ["launch_bound"], import_s: 17, elapsed_s: 120,
      results: {
        launch_bound: {
          step_ms: 9.3, k: 13, rounds: 16,
          parts: {
            ranges: { wall, cpu: wall, seconds: 4 },
            reader: { unavailable: "no ring file" },
            all: { wall, cpu: wall, seconds: 4 },
          },
          hook_calls_us: { "ctypes mark (gpumem_hook_mark)": 0.41 },
        },
      },
    };
    const json = join(dir, "run.json");
    writeFileSync(json, JSON.stringify(run));
    const out = join(dir, "render");
    const r = py([PARTS, out, "--render", json]);
    expect(r.code).toBe(0);
    const md = readFileSync(join(out, "agent_parts.md"), "utf8");
    expect(md).toBe(r.stdout);
    const row = md.split("\n").find((l) => l.startsWith("| ranges |"))!;
    expect(row).toContain(`+${wall.median.toFixed(4)} (+${wall.q1.toFixed(4)}…+${wall.q3.toFixed(4)})`);
    expect(row).toContain(`+${wall.pct.toFixed(2)}%`);
    expect(md).toContain("| reader | a ring reader process | – | not switchable: no ring file |");
    expect(md).toContain(`All parts together: +${wall.pct.toFixed(2)}% of the step`);
    expect(md).toContain("| ctypes mark (gpumem_hook_mark) | 0.410 |");
  });
});

describe("bench/agent_overhead_gpt2.py --render", () => {
  test("each mode's difference to `none` of the same repetition, its median as a share of none's", () => {
    const none = [10, 11, 12];
    const agent = [10.5, 11.2, 12.9];
    const mk = (mode: string, xs: number[]) => xs.map((x, rep) => ({ mode, rep, launch_bound: { wall_ms: x, cpu_ms: x, steps: 100 }, process_s: 6, cuda_init_s: 0.3 }));
    const run = {
      date: "2026-01-01T00:00:00Z", gpu: "H100", torch: "2.11", transformers: "5.17", cpus: "2,3", reps: 3, gpu_steps: 40, launch_steps: 100,
      command: "python3 bench/agent_overhead_gpt2.py OUT_DIR", import_torch_s: 6, import_transformers_s: 11, elapsed_s: 60,
      runs: { none: mk("none", none), "tracker-bare": mk("tracker-bare", agent) }, errors: [],
    };
    const json = join(dir, "gpt2.json");
    writeFileSync(json, JSON.stringify(run));
    const r = py([GPT2, join(dir, "gpt2"), "--render", json]);
    expect(r.code).toBe(0);
    const d = median(agent.map((x, i) => x - (none[i] ?? Number.NaN)));
    const row = r.stdout.split("\n").find((l) => l.startsWith("| tracker-bare |"))!;
    expect(row).toContain(`+${d.toFixed(3)} (`);
    expect(row).toContain(`, +${((100 * d) / median(none)).toFixed(2)}% |`);
  });
});
