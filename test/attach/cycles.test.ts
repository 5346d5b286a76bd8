// 100 attach/detach cycles into one process leave no file descriptor, thread, mapping or file
// behind, and the program's output and status are unchanged. The stop time of each is kept for
// bench/attach_stop.ts's numbers (not asserted here: a shared machine's timings are no test).
import { expect, test } from "bun:test";
import { detachProcess } from "../../src/commands/detach";
import { agentFiles, attach, counts, probeRecords, startTarget, testEnv } from "./support";

async function settled(pid: number, want: ReturnType<typeof counts>): Promise<ReturnType<typeof counts>> {
  // The agent's threads end just after their reply: wait for them, boundedly.
  let now = counts(pid);
  for (let i = 0; i < 100 && JSON.stringify(now) !== JSON.stringify(want); i++) await Bun.sleep(20), (now = counts(pid));
  return now;
}

function diffMaps(a: string, b: string): string {
  const had = new Set(a.split("\n"));
  return b.split("\n").filter((l) => !had.has(l)).join("\n");
}

export async function cycles(n: number): Promise<number[]> {
  const env = testEnv();
  const stop = `${env.GPUMEM_TUI_DIR}.stop`;
  const t = await startTarget("serve", 0, stop);
  const stopped: number[] = [];
  const once = async () => {
    const r = await attach(t.pid, env);
    if (!r.ok) throw new Error(r.line);
    stopped.push(r.stoppedUs);
    const d = await detachProcess(t.pid, env);
    if (!d.ok) throw new Error(d.line);
  };
  // The first cycles import what every later one finds loaded (ctypes, the payload) and fill the C
  // library's caches of threads' stacks and malloc arenas (kept by glibc, bounded: 8 per core):
  // a leak grows with every cycle, a cache stops growing. So: counts after cycle 20 and after 100.
  const quiet = async () => {
    const c = await settled(t.pid, { ...counts(t.pid), threads: 1 });
    return { c, maps: await Bun.file(`/proc/${t.pid}/maps`).text() };
  };
  try {
    for (let i = 0; i < 20; i++) await once();
    const before = await quiet();
    for (let i = 20; i < n; i++) await once();
    const after = await quiet();
    // Our page (a few KiB, anonymous) never stays; the C library's cached 8 MiB thread stacks may come
    // and go between the two counts: glibc keeps up to 40 MiB of freed stacks (five, two mappings each,
    // the stack and its guard), more of them where a loaded machine let the agent's threads of two
    // cycles overlap (9 once in a full run). A dozen at most, where a leak of one a cycle is 80.
    const added = diffMaps(before.maps, after.maps).split("\n").filter(Boolean);
    const small = added.filter((l) => {
      const [a, b] = l.split(" ")[0]!.split("-").map((x) => parseInt(x, 16));
      return l.includes(" rw-p ") && b! - a! <= 64 * 1024; // a stack's guard page is ---p
    });
    expect(small).toEqual([]);
    expect(Math.abs(after.c.maps - before.c.maps)).toBeLessThanOrEqual(12);
    expect({ fds: after.c.fds, threads: after.c.threads }).toEqual({ fds: before.c.fds, threads: 1 });
    expect(agentFiles(env)).toEqual([]);
    expect(probeRecords(env, t.pid).length).toBe(n);
  } finally {
    await Bun.write(stop, ""); // the target ends with the test, whatever failed
  }
  expect(await t.done).toEqual({ stdout: "checksum served\n", code: 0 });
  return stopped;
}

test("100 attach/detach cycles leave no fd, thread, mapping or file behind", async () => {
  const stopped = await cycles(100);
  expect(stopped.length).toBe(100);
  expect(stopped.every((us) => us > 0)).toBe(true);
}, 120_000);
