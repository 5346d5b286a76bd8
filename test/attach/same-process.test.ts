// The attach helper acts only on the process asked for (issue 35, build item 2: "a process that is not
// the one asked for"). attach checks the pid and its start time, then runs gpumem-inject; a process
// that exits and whose pid goes to another in between would be stopped and written by the helper.
// So attach passes the start time it checked (--start-time), and the helper compares it once it
// holds the pid (every thread seized: the pid cannot be reused then) or, for the probe, once it has
// read it. A pid cannot be made to be reused here at will: a real python with a start time that is
// not its own stands for a pid given to a later process.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildInject, HELPER_EXIT, runHelper } from "../../src/attach/helper";
import { startTicks } from "../../src/collect/procfs";
import { ROOT } from "../../src/root";
import { expectRunsOn, startSleeper } from "./support";

const built = buildInject();
if (!built.ok) throw new Error(built.error);

const ended: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const end of ended.splice(0)) await end();
});

/** A python that reaches a safe point every 10 ms (a pending call runs at once), and its start time. */
async function target(): Promise<{ pid: number; start: number }> {
  const t = await startSleeper(["python3"], { code: "import time\nprint('ready', flush=True)\nwhile True: time.sleep(0.01)" });
  ended.push(t.end);
  const start = startTicks(t.pid);
  if (start === null) throw new Error(`no start time for ${t.pid}`);
  return { pid: t.pid, start };
}

/** The helper's line for a pid whose process started at `now`, asked for as started at `asked`. */
function notSameLine(pid: number, now: number, asked: number): string {
  return `process ${pid} is no longer the process asked for (started at ${(now / 100).toFixed(2)} s after boot, not ${(asked / 100).toFixed(2)} s): nothing was done to it`;
}

/** Python text that leaves a mark where it ran, and where that mark is. */
function marking(): { text: string; mark: string } {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-same-"));
  ended.push(async () => rmSync(dir, { recursive: true, force: true }));
  const mark = join(dir, "ran");
  return { text: `open(${JSON.stringify(mark)}, "w").close()\n`, mark };
}

async function waitFor(cond: () => boolean, ms: number): Promise<boolean> {
  for (const until = Date.now() + ms; !cond(); await Bun.sleep(20)) if (Date.now() >= until) return false;
  return true;
}

describe("gpumem-inject --start-time: only the process asked for", () => {
  test("inject with a start time not the pid's: refused with its own status once the threads are held, let go, nothing queued", async () => {
    const t = await target();
    const { text, mark } = marking();
    const r = await runHelper(["inject", String(t.pid), "/dev/stdin", "--start-time", String(t.start - 1)], text);
    expect(r.code).toBe(HELPER_EXIT.notSame);
    expect(r.error).toBe(notSameLine(t.pid, t.start, t.start - 1));
    expectRunsOn(t.pid);
    // Queued, the text would have run within 10 ms.
    expect(await waitFor(() => existsSync(mark), 500)).toBe(false);
  });

  test("inject with the pid's own start time: the text is queued and runs", async () => {
    const t = await target();
    const { text, mark } = marking();
    const r = await runHelper(["inject", String(t.pid), "/dev/stdin", "--start-time", String(t.start)], text);
    expect(r.error).toBe("");
    expect(r.code).toBe(0);
    expect(r.fields.pid).toBe(String(t.pid));
    expect(await waitFor(() => existsSync(mark), 5000)).toBe(true);
    expectRunsOn(t.pid);
  });

  test("probe: refused with that status where the start time is not the pid's, its line where it is", async () => {
    const t = await target();
    const wrong = await runHelper(["probe", String(t.pid), "--start-time", String(t.start + 1)]);
    expect({ code: wrong.code, error: wrong.error }).toEqual({ code: HELPER_EXIT.notSame, error: notSameLine(t.pid, t.start, t.start + 1) });
    const right = await runHelper(["probe", String(t.pid), "--start-time", String(t.start)]);
    expect(right.error).toBe("");
    expect(right.code).toBe(0);
    expect(right.fields.python).toMatch(/^3\.\d+\.\d+$/);
    expectRunsOn(t.pid);
  });

  test("a start time that is not a number is a usage error, nothing done", async () => {
    const t = await target();
    for (const bad of ["x", "0", "12x", "-5"]) {
      const r = await runHelper(["inject", String(t.pid), "/dev/stdin", "--start-time", bad], "pass\n");
      expect({ bad, code: r.code, error: r.error }).toEqual({ bad, code: HELPER_EXIT.usage, error: `not a start time: ${bad}` });
    }
    expectRunsOn(t.pid);
  });
});

test("HELPER_EXIT says every status of cuda/inject_common.h's EXIT_* by its own number", () => {
  const header = readFileSync(join(ROOT, "cuda/inject_common.h"), "utf8");
  const statuses = [...header.matchAll(/^\s*EXIT_([A-Z_]+) = (\d+),/gm)].map((m) => [m[1]!.toLowerCase().replace(/_(.)/g, (_, c: string) => c.toUpperCase()), Number(m[2])]);
  expect(statuses.length).toBeGreaterThan(10);
  const ours = Object.entries(HELPER_EXIT).filter(([name]) => name !== "killed");
  expect(Object.fromEntries(ours)).toEqual(Object.fromEntries(statuses));
});
