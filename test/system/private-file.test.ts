// Files holding a program's output or command line: never a planted file, never through a link,
// 0600; temporary ones removed at exit and on SIGINT, SIGTERM and SIGHUP. Other users are played by
// setpriv with uid 65534 where the tests run as root (a visible skip otherwise).
import { describe, expect, test } from "bun:test";
import { chownSync, closeSync, existsSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPrivate, createPrivateTemp, openOutput, PrivateFileError, writeAll, writePrivate } from "../../src/system/private-file";

const root = process.getuid?.() === 0;
const asRoot = (name: string, fn: () => void | Promise<void>) => (root ? test(name, fn) : test.skip(`${name} (needs root, to play another user)`, fn));
const dir = mkdtempSync(join(tmpdir(), "gpumem-private-"));
const victim = (name: string) => {
  const p = join(dir, name);
  writeFileSync(p, "the victim's own words\n", { mode: 0o644 });
  return p;
};

describe("createPrivate", () => {
  test("a new file: 0600 whatever the umask", () => {
    const old = process.umask(0);
    try {
      const p = join(dir, "new");
      closeSync(createPrivate(p));
      expect(statSync(p).mode & 0o777).toBe(0o600);
    } finally {
      process.umask(old);
    }
  });

  test("a link planted at the name is not followed: its target is untouched", () => {
    const target = victim("target-1");
    const p = join(dir, "planted-link");
    symlinkSync(target, p);
    expect(() => createPrivate(p)).toThrow(PrivateFileError);
    expect(readFileSync(target, "utf8")).toBe("the victim's own words\n");
    expect(() => writePrivate(p, "ours")).toThrow(/already there/);
    expect(readFileSync(target, "utf8")).toBe("the victim's own words\n");
  });

  asRoot("a file another user put there first is never reused", () => {
    const p = join(dir, "planted-file");
    writeFileSync(p, "", { mode: 0o666 });
    chownSync(p, 65534, 65534);
    expect(() => writePrivate(p, "secret")).toThrow(/already there/);
    expect(readFileSync(p, "utf8")).toBe("");
  });

  test("a temporary name no one can guess, created the same way", () => {
    const a = createPrivateTemp("gpumem-tui-run-1-", ".log");
    const b = createPrivateTemp("gpumem-tui-run-1-", ".log");
    closeSync(a.fd);
    closeSync(b.fd);
    expect(a.path).not.toBe(b.path);
    expect(a.path).toMatch(/gpumem-tui-run-1-[0-9a-f]{12}\.log$/);
    expect(statSync(a.path).mode & 0o777).toBe(0o600);
  });
});

describe("openOutput: a path the user names", () => {
  test("new: created 0600; an own file: replaced in place and set to 0600", () => {
    const p = join(dir, "out-new");
    const a = openOutput(p);
    expect(a.created).toBe(true);
    closeSync(a.fd);
    expect(statSync(p).mode & 0o777).toBe(0o600);
    const own = victim("out-own");
    const b = openOutput(own);
    expect(b.created).toBe(false);
    writeAll(b.fd, "new\n");
    closeSync(b.fd);
    expect(readFileSync(own, "utf8")).toBe("new\n");
    expect(statSync(own).mode & 0o777).toBe(0o600);
  });

  test("refused: a link (not followed), a hard link, a directory, a FIFO (without hanging)", () => {
    const target = victim("target-2");
    const link = join(dir, "out-link");
    symlinkSync(target, link);
    expect(() => openOutput(link)).toThrow(/symbolic link/);
    const hard = join(dir, "out-hard");
    linkSync(victim("target-3"), hard);
    expect(() => openOutput(hard)).toThrow(/other name/);
    expect(readFileSync(hard, "utf8")).toBe("the victim's own words\n");
    const sub = join(dir, "out-dir");
    mkdirSync(sub);
    expect(() => openOutput(sub)).toThrow(/not a regular file/);
    const fifo = join(dir, "out-fifo");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    expect(() => openOutput(fifo)).toThrow(/not a regular file/);
    expect(readFileSync(target, "utf8")).toBe("the victim's own words\n");
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
  });

  asRoot("refused: another user's file (its owner would read what is written)", () => {
    const p = victim("out-theirs");
    chownSync(p, 65534, 65534);
    expect(() => openOutput(p)).toThrow(/belongs to another user \(uid 65534\)/);
    expect(readFileSync(p, "utf8")).toBe("the victim's own words\n");
  });
});

describe("removeOnExit", () => {
  const SCRIPT = `
    import { temporaryDir } from ${JSON.stringify(join(import.meta.dir, "..", "..", "src", "system", "private-file.ts"))};
    const t = temporaryDir("gpumem-tui-ring-");
    require("node:fs").writeFileSync(t.path + "/x", "data");
    if (process.argv[2] === "listener") process.on("SIGTERM", () => setTimeout(() => process.exit(5), 50));
    console.log(t.path);
    setTimeout(() => {}, 20000);
  `;
  const script = join(dir, "temporary.ts");
  writeFileSync(script, SCRIPT);

  async function endedBy(sig: NodeJS.Signals, mode = "") {
    const p = Bun.spawn([process.execPath, script, mode], { stdout: "pipe", stderr: "pipe" });
    const reader = p.stdout.getReader();
    const { value } = await reader.read();
    const path = new TextDecoder().decode(value).trim();
    expect(existsSync(join(path, "x"))).toBe(true);
    p.kill(sig);
    await p.exited;
    return { path, code: p.exitCode, signal: p.signalCode };
  }

  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    test(`${sig}: the directory goes, and the process still ends by ${sig}`, async () => {
      const r = await endedBy(sig);
      expect(existsSync(r.path)).toBe(false);
      expect(r.signal).toBe(sig);
    });
  }

  test("where another part listens for the signal, it ends the process its way, and exit removes the directory", async () => {
    const r = await endedBy("SIGTERM", "listener");
    expect(r.code).toBe(5);
    expect(existsSync(r.path)).toBe(false);
  });
});
