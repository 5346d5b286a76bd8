// The end of a run (docs/protocol.md): however short the program, `run --json`'s final document
// names its record_function ranges and its tensors as a long run's does, and no file of the agent
// is left behind. The real agent and the real CLI, with torch and the allocator hook replaced by
// their doubles (test/agent/torch_double.py, test/support/hook_double.c) so that it runs on a CPU;
// the same on a GPU with a transformers GPT-2 (`bun run test:gpu`).
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Document } from "../../src/system/schema";
import { gpuTest } from "../support/gpu";
import { agentDir, runJson } from "../support/run-json";
import { buildLibrary } from "../support/native";

const ROOT = join(import.meta.dir, "..", "..");
const SHORT_RUN = join(ROOT, "test", "agent", "short_run.py");

function shortRun(dir: string, interval: number, ...args: string[]) {
  const env = { GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"), GPUMEM_TUI_RING_CAPACITY: "4096" };
  return runJson(dir, ["python3", SHORT_RUN, ...args], interval, env);
}

function profileOf(doc: Document, pid: number) {
  const p = doc.processes.find((x) => x.pid === pid);
  return p?.pytorch?.profile ?? null;
}

/** What a named final document holds for the short run's model: its ranges and tensors by name. */
function expectNamed(doc: Document, pid: number) {
  const profile = profileOf(doc, pid)!;
  expect(profile).not.toBeNull();
  expect(profile.steps_complete).toBeGreaterThanOrEqual(13);
  const ranges = profile.last_step!.ranges.map((r) => r.name);
  expect(ranges).toEqual(expect.arrayContaining(["data", "train_step"]));
  for (const r of ranges) expect(r).not.toMatch(/^range#/);
  const tensors = new Map(profile.largest_tensors.map((t) => [t.name, t.category]));
  expect(tensors.get("wte.weight")).toBe("parameter");
  expect(tensors.get("exp_avg of wte.weight")).toBe("optimizer_state");
  expect(tensors.get("exp_avg_sq of wte.weight")).toBe("optimizer_state");
}

describe("the end of a run under run --json", () => {
  test("a program shorter than the monitor's tick: its final document names ranges and tensors, its files are gone", () => {
    const dir = agentDir();
    // The first tick comes before the agent exists; the next would come 5 s later: the program
    // has long ended by then, so all the monitor knows of it comes after its exit.
    const r = shortRun(dir, 5000);
    expect(r.code).toBe(0);
    expect(r.lines).toBe(2);
    expectNamed(r.last, r.pid);
    expect(readdirSync(dir)).toEqual([]);
  });

  test("a program the monitor saw start, then 14 steps between two ticks: named at the end all the same", () => {
    const dir = agentDir();
    // Seen alive (and asked for names) during the wait; the steps and the exit come faster than
    // the agent's sync loop rewrites its manifest with the ranges.
    const r = shortRun(dir, 100, "--wait-before", "0.6");
    expect(r.code).toBe(0);
    expect(r.lines).toBeGreaterThan(3);
    expectNamed(r.last, r.pid);
    expect(readdirSync(dir)).toEqual([]);
  });

  test("an agent killed without its close (SIGKILL): the monitor reads what is left, then removes its files", () => {
    const dir = agentDir();
    const r = shortRun(dir, 5000, "--sigkill");
    expect(r.code).toBe(128 + 9);
    const profile = profileOf(r.last, r.pid)!;
    expect(profile.steps_complete).toBeGreaterThanOrEqual(13); // the ring's records, read after the death
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe("the agent's files at exit", () => {
  function direct(env: Record<string, string>) {
    const dir = agentDir();
    const p = Bun.spawnSync(["python3", SHORT_RUN, "--steps", "3"], {
      env: { ...process.env, PYTHONPATH: join(ROOT, "agent"), GPUMEM_TUI_DIR: dir, GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"), GPUMEM_TUI_RING_CAPACITY: "4096", ...env },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(p.exitCode).toBe(0);
    return { dir, pid: Number(/^pid (\d+)/m.exec(p.stdout.toString())?.[1]) };
  }

  test("removed at exit where no monitor asked for them, or the one that asked is gone", () => {
    expect(readdirSync(direct({}).dir)).toEqual([]);
    const gone = Bun.spawnSync(["true"]).pid;
    expect(readdirSync(direct({ GPUMEM_TUI_MONITOR_PID: String(gone) }).dir)).toEqual([]);
  });

  test("left to the monitor that started the program, with every range and the tensors' names at exit", () => {
    const { dir, pid } = direct({ GPUMEM_TUI_MONITOR_PID: String(process.pid) });
    expect(readdirSync(dir).sort()).toEqual([`${pid}.json`, `${pid}.ring`]);
    const m = JSON.parse(readFileSync(join(dir, `${pid}.json`), "utf8"));
    expect(Object.values(m.ranges).sort()).toEqual(["data", "train_step"]);
    expect(m.final_names.step).toBe(3);
    expect(m.final_names.write_index).toBeGreaterThan(0);
    expect(m.final_names.tensors.map((t: { name: string }) => t.name)).toEqual(expect.arrayContaining(["wte.weight", "exp_avg of wte.weight"]));
    expect(existsSync(join(dir, `${pid}.sock`))).toBe(false);
  });
});

// On a GPU: a transformers GPT-2 (from a config, no download), 14 steps with record_function
// ranges, under `run --json`; python3 must have torch and transformers (PYTHON=… picks another).
gpuTest("a 14-step transformers GPT-2 under run --json: the final document names its ranges and tensors", () => {
  const dir = agentDir();
  const r = runJson(dir, [process.env.PYTHON ?? "python3", join(ROOT, "test", "gpu", "hf_gpt2_short.py"), "--steps", "14"], 1000);
  if (r.code !== 0) console.log(r.stdout, r.stderr);
  expect(r.code).toBe(0);
  const profile = profileOf(r.last, r.pid)!;
  expect(profile.steps_complete).toBeGreaterThanOrEqual(13);
  const ranges = profile.last_step!.ranges.map((x) => x.name);
  expect(ranges).toEqual(expect.arrayContaining(["data", "train_step"]));
  for (const x of ranges) expect(x).not.toMatch(/^range#/);
  const names = new Map(profile.largest_tensors.map((t) => [t.name, t.category]));
  expect(names.get("transformer.wte.weight")).toBe("parameter");
  expect(names.get("exp_avg of transformer.wte.weight")).toBe("optimizer_state");
  expect(readdirSync(dir)).toEqual([]);
}, 300_000);
