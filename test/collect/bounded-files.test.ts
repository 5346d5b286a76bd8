// What the monitor reads from the agents' directory and beside a recording is bounded: a manifest
// past MAX_MANIFEST_BYTES, or a FIFO where a manifest should be, is reported in words (the other
// agents found as ever) and never blocks the monitor; an NVML track alike (MAX_TRACK_BYTES). Each
// runs in a process of its own with a deadline: the old reader waited on a FIFO for ever.
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, existsSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_MANIFEST_BYTES } from "../../src/system/manifest";
import { MAX_TRACK_BYTES } from "../../src/system/recorded";
import { produce } from "../support/native";

const SRC = join(import.meta.dir, "..", "..", "src");
const sleepers = [Bun.spawn(["sleep", "60"]), Bun.spawn(["sleep", "60"]), Bun.spawn(["sleep", "60"])];
afterAll(() => sleepers.forEach((s) => s.kill()));

function agentDir(): string {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-bounded-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}

function manifest(dir: string, pid: number): Record<string, unknown> {
  return { version: 1, pid, cmdline: ["python", "train.py"], devices: [0], torch_version: "2.11.0", hook_mode: "hook", ring: join(dir, `${pid}.ring`), socket: join(dir, `${pid}.sock`) };
}

/** A live agent whose ring and manifest are as they should be. */
function goodAgent(dir: string, pid: number): void {
  produce(join(dir, `${pid}.ring`), 64, 4, "--pid", pid);
  writeFileSync(join(dir, `${pid}.json`), JSON.stringify(manifest(dir, pid)), { mode: 0o600 });
}

/** `code` run by bun in a process of its own, within 10 s: what it printed, as JSON. */
function isolated(code: string): unknown {
  const p = Bun.spawnSync(["bun", "-e", code], { stdout: "pipe", stderr: "pipe", timeout: 10_000 });
  expect({ signal: p.signalCode ?? null, code: p.exitCode, err: p.stderr.toString() }).toEqual({ signal: null, code: 0, err: "" });
  return JSON.parse(p.stdout.toString());
}

/** One refresh of an AgentWatcher over `dir`: the agents it found and the problems it said. */
function refresh(dir: string): { agents: number[]; problems: string[] } {
  return isolated(`
    const { AgentWatcher } = await import(${JSON.stringify(join(SRC, "collect/agents.ts"))});
    const w = new AgentWatcher(${JSON.stringify(dir)});
    const agents = w.refresh().map((a) => a.pid);
    console.log(JSON.stringify({ agents, problems: w.problems }));
    w.close();`) as { agents: number[]; problems: string[] };
}

describe("the agents' directory", () => {
  test("a manifest past the cap is refused in words, not read; the other agent is found", () => {
    const dir = agentDir();
    const [good, big] = sleepers.map((s) => s.pid) as [number, number];
    goodAgent(dir, good);
    // Valid JSON padded with spaces one byte past the cap: the old reader took it whole.
    const text = JSON.stringify(manifest(dir, big));
    writeFileSync(join(dir, `${big}.json`), text + " ".repeat(MAX_MANIFEST_BYTES + 1 - text.length), { mode: 0o600 });
    const r = refresh(dir);
    expect(r.agents).toEqual([good]);
    expect(r.problems).toEqual([`${join(dir, `${big}.json`)} is ${MAX_MANIFEST_BYTES + 1} bytes: larger than any manifest (${MAX_MANIFEST_BYTES} bytes at most); refusing`]);
  });

  test("a FIFO where a live process's manifest should be is refused at once, never waited on", () => {
    const dir = agentDir();
    const [good, , fifoPid] = sleepers.map((s) => s.pid) as [number, number, number];
    goodAgent(dir, good);
    const fifo = join(dir, `${fifoPid}.json`);
    expect(Bun.spawnSync(["mkfifo", "-m", "600", fifo]).exitCode).toBe(0);
    const r = refresh(dir);
    expect(r.agents).toEqual([good]);
    expect(r.problems).toEqual([`${fifo} is a FIFO (named pipe), not a manifest file`]);
  });

  test("a FIFO named after a dead process is removed as a stale file, never waited on", () => {
    const dir = agentDir();
    const dead = Bun.spawnSync(["true"]).pid;
    const fifo = join(dir, `${dead}.json`);
    expect(Bun.spawnSync(["mkfifo", "-m", "600", fifo]).exitCode).toBe(0);
    expect(refresh(dir)).toEqual({ agents: [], problems: [] });
    expect(existsSync(fifo)).toBe(false);
  });
});

describe("the NVML track beside a recording", () => {
  const readTrack = (ring: string) =>
    isolated(`
      const { readTrack } = await import(${JSON.stringify(join(SRC, "collect/demo.ts"))});
      try { readTrack(${JSON.stringify(ring)}); console.log(JSON.stringify("read")); } catch (e) { console.log(JSON.stringify(e.message)); }`);

  test("a FIFO is refused before it can block", () => {
    const dir = agentDir();
    const fifo = join(dir, "x.nvml.ndjson");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    expect(readTrack(join(dir, "x.ring"))).toBe(`${fifo} is a FIFO (named pipe), not a recorded NVML track file`);
  });

  test("one past the cap is refused by its size, before any of it is read", () => {
    const dir = agentDir();
    const f = join(dir, "x.nvml.ndjson");
    const fd = openSync(f, "w");
    ftruncateSync(fd, MAX_TRACK_BYTES + 1); // sparse: costs no disk
    closeSync(fd);
    expect(readTrack(join(dir, "x.ring.gz"))).toBe(`${f} is ${MAX_TRACK_BYTES + 1} bytes: larger than any recorded NVML track (${MAX_TRACK_BYTES} bytes at most); refusing`);
  });
});
