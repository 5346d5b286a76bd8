// The agent rewrites its manifest (a new file renamed over the old) when ranges, lines or an OOM
// snapshot appear; the monitor reads it again on the next tick. File times tick with the kernel's
// coarse clock, so two rewrites can carry the same modification time: the stamp that decides also
// holds the size and the inode.
import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, renameSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AgentWatcher } from "../../src/collect/agents";
import { produce } from "../support/native";

function rewrite(dir: string, pid: number, m: Record<string, unknown>) {
  const path = join(dir, `${pid}.json`);
  writeFileSync(`${path}.tmp`, JSON.stringify(m), { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
  return path;
}

test("a rewrite with the same modification time as the last read is read again", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-reread-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  const s = Bun.spawn(["sleep", "30"]);
  try {
    produce(join(dir, `${s.pid}.ring`), 64, 11, "--pid", s.pid);
    const m = { version: 1, pid: s.pid, cmdline: ["python", "train.py"], devices: [0], hook_mode: "hook", ring: join(dir, `${s.pid}.ring`), socket: join(dir, `${s.pid}.sock`), ranges: {} };
    const path = rewrite(dir, s.pid, m);
    const tick = 1_700_000_000; // one time for both writes, as the file clock can give
    utimesSync(path, tick, tick);
    const w = new AgentWatcher(dir);
    expect(w.refresh()[0]!.manifest.ranges).toEqual({});
    // The sync loop's rewrite within the same tick of the file clock: same time, new content.
    rewrite(dir, s.pid, { ...m, ranges: { "1": "train_step" } });
    utimesSync(path, tick, tick);
    expect(statSync(path).mtimeMs).toBe(tick * 1000);
    expect(w.refresh()[0]!.manifest.ranges).toEqual({ "1": "train_step" });
    w.close();
  } finally {
    s.kill();
  }
});
