// Hostile rings and ring recordings (`replay`, and the live reader): each refused in one line within
// bounded time and memory, a ring cut short under the live reader an error rather than a SIGBUS, and
// a .ring.gz never unpacked to disk (test/fixtures/hostile/make.ts makes them).
import { describe, expect, test } from "bun:test";
import { closeSync, ftruncateSync, mkdtempSync, openSync, readdirSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ring, ringGzBomb, ringHeader, zerosGz } from "../fixtures/hostile/make";
import { expectRefused, runCli } from "../support/hostile";

const HOSTILE = join(import.meta.dir, "..", "fixtures", "hostile");
const tmp = mkdtempSync(join(tmpdir(), "gpumem-hostile-ring-"));

/** A ring file of `bytes` (sparse past its header) whose one lane's write index is `w`. */
function sparseRing(name: string, capacity: number | bigint, w: bigint, bytes: number): string {
  const f = join(tmp, name);
  const fd = openSync(f, "w");
  writeSync(fd, ringHeader({ capacity, writeIndex: w }));
  ftruncateSync(fd, bytes);
  closeSync(fd);
  return f;
}

describe("hostile rings", () => {
  test("a clock calibration of NaN is refused (it made `replay --json` print without end)", () => {
    const f = join(HOSTILE, "nan-clock.ring");
    expectRefused(runCli(["replay", f, "--json"]), f, /clock calibration of nan ns a tick/);
  });

  test("a sparse 4 GiB ring whose write index is 2^40 is refused: past the records the file holds", () => {
    const f = sparseRing("sparse40.ring", 1 << 26, 1n << 40n, 4096 + 2 ** 26 * 64);
    expectRefused(runCli(["replay", f, "--json"]), f, /write index 1099511627776 is past the 0 records its file holds/);
  });

  test("a write index of 2^62 is refused (it took 9.5 s and 4.2 GB)", () => {
    const f = sparseRing("sparse62.ring", 1 << 26, 1n << 62n, 4096 + 2 ** 26 * 64);
    expectRefused(runCli(["replay", f, "--json"]), f, /write index 4611686018427387904 is past any writer's/);
  });

  test("a capacity past the agent's largest (2^26 records a lane) is refused", () => {
    const f = sparseRing("capacity.ring", 1n << 32n, 1n << 40n, 4096 + 2 ** 32 * 64);
    expectRefused(runCli(["replay", f, "--json"]), f, /impossible geometry \(.*capacity 4294967296 of at most 67108864/);
  });

  test("a .ring.gz whose header promises 4 GiB is refused at the header, nothing written to disk", () => {
    const f = join(tmp, "bomb.ring.gz");
    writeFileSync(f, ringGzBomb(300));
    const scratch = mkdtempSync(join(tmp, "tmpdir-"));
    expectRefused(runCli(["replay", f, "--json"], { TMPDIR: scratch }), f, /header promises 4294971392 bytes: it expands past 256 MiB \(\d+× its compressed size\); refusing/);
    expect(readdirSync(scratch)).toEqual([]);
  });

  test("a .ring.gz that is not a ring is refused on its first bytes (it was unpacked whole first)", () => {
    const f = join(tmp, "zeros.ring.gz");
    writeFileSync(f, zerosGz(300));
    const scratch = mkdtempSync(join(tmp, "tmpdir-"));
    expectRefused(runCli(["replay", f, "--json"], { TMPDIR: scratch }), f, /first bytes are not the ring magic/);
    expect(readdirSync(scratch)).toEqual([]);
  });

  test("a FIFO, a directory or a device given as a recording is refused before it can block", () => {
    for (const name of ["x.ring", "x.ring.gz", "x.pickle"]) {
      const fifo = join(tmp, `fifo-${name}`);
      expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
      expectRefused(runCli(["replay", fifo, "--json"]), fifo, /is a FIFO \(named pipe\), not a recording file/);
    }
    expectRefused(runCli(["replay", "/dev/zero", "--json"]), "/dev/zero", /is a device, not a recording file/);
    expectRefused(runCli(["replay", tmp, "--json"]), tmp, /is a directory, not a recording file/);
  });

  test("a live ring cut short under its reader: its reads and header are errors, the monitor lives", () => {
    const f = join(tmp, "live.ring");
    writeFileSync(f, ring({ capacity: 1024, written: 600 }));
    // In a process of its own: the old reader died of SIGBUS here.
    const script = `
      const { openRing } = await import(${JSON.stringify(join(import.meta.dir, "../../src/ffi/ring.ts"))});
      const { newEventBatch } = await import(${JSON.stringify(join(import.meta.dir, "../../src/ffi/events.ts"))});
      const { truncateSync } = await import("node:fs");
      const r = openRing(${JSON.stringify(f)}, { fold: true });
      const said = [String(r.header().write_index)];
      truncateSync(${JSON.stringify(f)}, 0);
      for (const f of [() => r.read(newEventBatch(64)), () => r.header(), () => r.read(newEventBatch(64))]) {
        try { f(); said.push("read"); } catch (e) { said.push(e.name + ": " + e.message); }
      }
      r.close();
      console.log(JSON.stringify(said));`;
    const p = Bun.spawnSync(["bun", "-e", script], { stdout: "pipe", stderr: "pipe", timeout: 10_000 });
    expect({ signal: p.signalCode ?? null, code: p.exitCode, err: p.stderr.toString() }).toEqual({ signal: null, code: 0, err: "" });
    const said = JSON.parse(p.stdout.toString()) as string[];
    expect(said[0]).toBe("600");
    for (const s of said.slice(1)) expect(s).toMatch(/^RingError: ring .*live\.ring was cut short while being read/);
  });

  test("a recording is read from a private copy: cut after it was opened, it still reads whole", () => {
    const f = join(tmp, "recorded.ring");
    writeFileSync(f, ring({ capacity: 1024, written: 600 }));
    const script = `
      const { openRing } = await import(${JSON.stringify(join(import.meta.dir, "../../src/ffi/ring.ts"))});
      const { newEventBatch } = await import(${JSON.stringify(join(import.meta.dir, "../../src/ffi/events.ts"))});
      const { truncateSync } = await import("node:fs");
      const r = openRing(${JSON.stringify(f)}, { copy: true });
      truncateSync(${JSON.stringify(f)}, 0);
      const b = newEventBatch(1024);
      console.log(JSON.stringify([r.read(b).count, r.header().write_index]));`;
    const p = Bun.spawnSync(["bun", "-e", script], { stdout: "pipe", stderr: "pipe", timeout: 10_000 });
    expect(p.stderr.toString()).toBe("");
    expect(JSON.parse(p.stdout.toString())).toEqual([600, 600]);
  });
});
