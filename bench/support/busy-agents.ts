// Busy agents, by simulation, for the benchmarks that follow them (bench/session.ts,
// bench/screens-agents.ts): N ring writers (the C producer the reader's tests use, through the same
// header as the hook), each writing a real recording's records again and again at a set rate, each
// with a manifest for a live process (a `sleep`), in a private agent directory.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { ACTION, newEventBatch } from "../../src/ffi/events";
import { buildTool } from "../../test/support/native";

/** The plain ring the writers replay (the producer maps a plain file): a .ring.gz is unpacked first. */
export function plainRing(recording: string): string {
  if (!recording.endsWith(".gz")) return recording;
  const out = join(mkdtempSync(join(tmpdir(), "gpumem-bench-ring-")), "recording.ring");
  writeFileSync(out, Bun.gunzipSync(readFileSync(recording)));
  return out;
}

/** A recording's own rate: records a second from its first step mark to its last. */
export function recordedRate(ring: string): number {
  const rec = openRingRecording(ring);
  const b = newEventBatch(1 << 20);
  rec.source.read(b);
  rec.close();
  let first = -1;
  let last = -1;
  for (let i = 0; i < b.count; i++) if (b.action[i] === ACTION.step) (first < 0 ? (first = i) : 0), (last = i);
  return (last - first) / ((b.time_us[last]! - b.time_us[first]!) / 1e6);
}

/** A new private agent directory (0700), as the agent makes one. */
export function agentDir(): string {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-bench-agents-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}

/** `n` writers into `dir`, each replaying `ring` at `rate` records a second for `seconds`; `pin`:
 *  the cores they run on (taskset's list), where the follower keeps a core of its own. Returns
 *  their stop. */
export function startWriters(dir: string, n: number, ring: string, rate: number, seconds: number, pin: string | null): () => void {
  const producer = buildTool("producer");
  const sleepers = Array.from({ length: n }, () => Bun.spawn(["sleep", String(seconds + 30)]));
  const writers = sleepers.map((s) => {
    const path = join(dir, `${s.pid}.ring`);
    const taskset = pin ? ["taskset", "-c", pin] : [];
    const w = Bun.spawn([...taskset, producer, path, String(1 << 20), String(Math.round(rate * (seconds + 10))), "--replay", ring, "--rate", String(Math.round(rate)), "--pid", String(s.pid)], { stdout: "ignore", stderr: "ignore" });
    const manifest = { version: 1, pid: s.pid, cmdline: ["train.py"], devices: [0], hook_mode: "hook", ring: path, socket: null };
    writeFileSync(join(dir, `${s.pid}.json`), JSON.stringify(manifest), { mode: 0o600 });
    return w;
  });
  return () => {
    for (const p of [...writers, ...sleepers]) p.kill();
  };
}
