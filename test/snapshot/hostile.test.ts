// Hostile snapshot files (`view`, and `replay` of a snapshot): each refused in one line, within
// bounded time and memory (test/fixtures/hostile/make.ts makes them).
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pickleGzBomb, SMALL } from "../fixtures/hostile/make";
import { expectRefused, runCli } from "../support/hostile";
import { parseSnapshotBytes } from "../../src/snapshot/read";
import { unpickle } from "../../src/snapshot/pickle";

const HOSTILE = join(import.meta.dir, "..", "fixtures", "hostile");
const tmp = mkdtempSync(join(tmpdir(), "gpumem-hostile-"));

describe("hostile snapshots", () => {
  test("the committed fixtures are what make.ts makes", async () => {
    for (const [name, make] of Object.entries(SMALL)) expect(new Uint8Array(await Bun.file(join(HOSTILE, name)).arrayBuffer())).toEqual(new Uint8Array(make()));
  });

  test("a dict key that is a DAG of tuples (DUP + TUPLE2, 100 bytes) is refused: keys are strings", () => {
    const f = join(HOSTILE, "tuple-dag-key.pickle");
    for (const cmd of ["view", "replay"]) expectRefused(runCli([cmd, f, "--json"]), f, /dict key that is a tuple/);
  });

  test("LONG_BINPUT at index 800,000,000 in a 45-byte file is refused: memo indexes are bounded by the file", () => {
    const f = join(HOSTILE, "memo-800m.pickle");
    expectRefused(runCli(["view", f, "--json"]), f, /memo index 800000000 past/);
  });

  test("a .pickle.gz that expands 500× is refused, the cap and the ratio said", () => {
    const f = join(tmp, "bomb.pickle.gz");
    writeFileSync(f, pickleGzBomb(512)); // ~0.5 MB expanding to 512 MiB of valid opcodes
    expectRefused(runCli(["view", f, "--json"]), f, /expands past 256 MiB \(\d+× its compressed size\); refusing/);
  });

  test("a FIFO, a directory or a device given as a snapshot is refused before it can block", () => {
    const fifo = join(tmp, "snapshot.pickle");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    expectRefused(runCli(["view", fifo, "--json"]), fifo, /is a FIFO \(named pipe\), not a snapshot file/);
    const dir = join(tmp, "dir.pickle");
    mkdirSync(dir);
    expectRefused(runCli(["view", dir, "--json"]), dir, /is a directory/);
    expectRefused(runCli(["view", "/dev/zero", "--json"]), "/dev/zero", /is a device/);
  });

  test("in memory too: tuple keys and far memo indexes refused, a gzip bomb capped", () => {
    expect(() => unpickle(SMALL["tuple-dag-key.pickle"]!())).toThrow(/dict key that is a tuple/);
    expect(() => unpickle(SMALL["memo-800m.pickle"]!())).toThrow(/memo index 800000000/);
    expect(() => parseSnapshotBytes(pickleGzBomb(272))).toThrow(/expands past 256 MiB/);
  });

  test("a memo written out of order (index within the file) is read back, and sizes nothing", () => {
    // PROTO 2, NONE POP ×3, "a", LONG_BINPUT 9 (slots 0 to 8 never written), POP, LONG_BINGET 9, STOP
    const p = new Uint8Array([0x80, 2, 0x4e, 0x30, 0x4e, 0x30, 0x4e, 0x30, 0x8c, 1, 0x61, 0x72, 9, 0, 0, 0, 0x30, 0x6a, 9, 0, 0, 0, 0x2e]);
    expect(unpickle(p)).toBe("a");
  });
});
