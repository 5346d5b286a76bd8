// attach into live python3 processes (no torch here: the torch check is bypassed, test-only, and a
// probe payload stands in for the agent): the program's output and exit status unchanged, the
// bootstrap run on the main thread at a safe point, the stop time measured.
import { describe, expect, test } from "bun:test";
import { agentFiles, attach, baseline, probeRecords, startTarget, TARGET, testEnv } from "./support";
import { detachProcess } from "../../src/commands/detach";

async function attachAndCheck(mode: string, code: number, extra: Parameters<typeof attach>[2] = {}) {
  const env = testEnv();
  // The same program left alone runs beside the one attached to: they share nothing. Where the
  // mode takes a stop file (busy, sleep), the one left alone is given a file that is there (its
  // own script), the one attached to a file made once it is detached: each then does the same work.
  const stop = `${env.GPUMEM_TUI_DIR}.stop`;
  const stops = mode === "busy" || mode === "sleep";
  const alone = baseline(mode, code, ...(stops ? [TARGET] : []));
  const t = await startTarget(mode, code, ...(stops ? [stop] : []));
  let r: Awaited<ReturnType<typeof attach>>;
  try {
    r = await attach(t.pid, env, extra);
    expect(r.line).toMatch(/^attached to process \d+ \(Python 3\.\d+\.\d+\); steps count from here; its threads were stopped \d+\.\d ms$/);
    expect(r.ok).toBe(true);
    const d = await detachProcess(t.pid, env);
    expect(d).toEqual({ ok: true, line: `detached from process ${t.pid}: probe detached` });
  } finally {
    if (stops) await Bun.write(stop, "");
  }
  expect(await t.done).toEqual(await alone);
  const rec = probeRecords(env, t.pid);
  expect(rec.length).toBe(1);
  // The bootstrap ran on the main thread (a pending call), the payload on a thread of its own.
  expect(rec[0]!.boot.main_thread).toBe(true);
  expect(rec[0]!.boot.thread).toBe(rec[0]!.main);
  expect(rec[0]!.payload_thread).not.toBe(rec[0]!.main);
  // At a safe point of the program's own Python code: the frame it interrupted is target.py's.
  expect(String((rec[0]!.boot.frame as unknown[] | null)?.[0])).toMatch(/target\.py$/);
  expect(agentFiles(env)).toEqual([]);
  return { r, t, env };
}

describe("attach into a running python3", () => {
  // Alone, before the others (they run concurrently): its 0.3 s into a 1.4 s call is the one timing
  // here that a busier machine could move.
  test("(c) holding the GIL in a long C call: no safe point in time, left exactly as it was", async () => {
    const env = testEnv();
    const want = await baseline("cbusy", 6); // first: a busy baseline beside it could delay its call
    const t = await startTarget("cbusy", 6);
    const maps = (await Bun.file(`/proc/${t.pid}/maps`).text()).trim().split("\n").length;
    // Between its "ready" and the long call the target passes a few safe points: on a loaded
    // machine it may still be there when the call is queued (then the bootstrap runs at once). The
    // call lasts 1.4 s here; 0.3 s in, the target is inside it.
    await Bun.sleep(300);
    const r = await attach(t.pid, env, { timeoutS: 0.5 });
    expect(r.ok).toBe(false);
    expect(r.line).toMatch(/^attach \d+: no safe point within 0\.5 s \(.*\); it was left as it was \(its threads were stopped [\d.]+ ms\); try again later$/);
    // Meanwhile the queued bootstrap's page is there; once the call ends it runs, finds no token,
    // unmaps its page and does nothing else.
    const after = await t.done;
    expect(after).toEqual(want);
    expect(probeRecords(env, t.pid)).toEqual([]);
    expect(agentFiles(env)).toEqual([]);
    expect(maps).toBeGreaterThan(0);
  }, 30_000);

  // The rest share nothing (each its own targets and agents' folder): concurrent.
  test.concurrent("(a) a busy Python loop", async () => {
    await attachAndCheck("busy", 7);
  }, 20_000);

  test.concurrent("(b) asleep in time.sleep", async () => {
    await attachAndCheck("sleep", 3);
  }, 20_000);

  test.concurrent("(d) several threads, asleep and busy", async () => {
    const { t } = await attachAndCheck("threads", 5);
    expect(t.pid).toBeGreaterThan(0);
  }, 20_000);

  test.concurrent("the calls made in threads blocked in read() and nanosleep(): both syscalls restart as if never interrupted", async () => {
    // One target a thread called in, both at once.
    await Promise.all(
      ["read", "sleep"].map(async (which) => {
        const env = testEnv();
        const t = await startTarget("io", 4);
        const r = await attach(t.pid, env, { callTid: t.tids[which] });
        expect(r.ok).toBe(true);
        expect((await detachProcess(t.pid, env)).ok).toBe(true);
        // read got the 5 bytes written later (not EINTR); nanosleep slept its whole 1.5 s and returned 0.
        expect(await t.done).toEqual({ stdout: "checksum [('read', (5, 0, 'hello')), ('sleep', (0, 0, True))]\n", code: 4 });
      }),
    );
  }, 30_000);

  test.concurrent("(c') the bootstrap unmaps its page even when inert", async () => {
    const env = testEnv();
    const t = await startTarget("serve", 0, `${env.GPUMEM_TUI_DIR}.stop`);
    const before = (await Bun.file(`/proc/${t.pid}/maps`).text()).trim().split("\n").length;
    // A token withdrawn at once: timeout shorter than any safe point can come.
    const r = await attach(t.pid, env, { timeoutS: 0.001 });
    expect(r.ok).toBe(false);
    await Bun.sleep(300);
    const after = (await Bun.file(`/proc/${t.pid}/maps`).text()).trim().split("\n").length;
    await Bun.write(`${env.GPUMEM_TUI_DIR}.stop`, "");
    expect(await t.done).toEqual({ stdout: "checksum served\n", code: 0 });
    expect(probeRecords(env, t.pid)).toEqual([]);
    // ctypes (for munmap) may map its own library the first time: nothing else stays.
    expect(after - before).toBeLessThanOrEqual(4);
  }, 20_000);

  test.concurrent("(e) a process exiting during the attach: its status unchanged, one clear line", async () => {
    // The exit lands at every stage of the attach across these delays: before the probe, while the
    // helper reads the maps or stops the threads, while the call waits, while the agent starts.
    for (let i = 0; i < 12; i++) {
      const env = testEnv();
      const t = await startTarget("exit", 9);
      await Bun.sleep((i % 6) * 10);
      const r = await attach(t.pid, env, { timeoutS: 1 });
      expect(await t.done).toEqual({ stdout: "checksum bye\n", code: 9 });
      if (!r.ok) expect(r.line).toMatch(/exited|no process/);
      expect(r.line.split("\n").length).toBe(1);
      expect(agentFiles(env).filter((f) => f.endsWith(".token"))).toEqual([]);
    }
  }, 30_000);
});
