// The agent's files against a full filesystem and other users (test_files.py, Python's unittest),
// started by `bun test` so that one command runs every test. Tests that need root (another uid, a
// tmpfs mount) are skipped by Python where the tests do not run as root: said here, not hidden.
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectUnittestPasses } from "../support/unittest";

test("agent: backed rings sized to their filesystem, private directories, files and hook cache (python3 -m unittest)", () => {
  expectUnittestPasses(join(import.meta.dir, "test_files.py"));
}, 120_000);

// `run --json` hands the agent GPUMEM_PROFILE_JSON (default: beside the samples); a name the agent
// would refuse at exit (a link, a FIFO planted in a shared project folder) is refused before the
// program starts, as --output is, and nothing behind it is touched.
describe("run --json: the line profile's path is checked before the program starts", () => {
  const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
  const shared = () => {
    const d = mkdtempSync(join(tmpdir(), "gpumem-lines-"));
    chmodSync(d, 0o1777);
    return d;
  };
  const run = (cwd: string, args: string[], env: Record<string, string> = {}) => {
    const marker = join(cwd, "started");
    const p = Bun.spawnSync(["bun", CLI, "run", "--json", ...args, "--", "touch", marker], { cwd, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode, err: p.stderr.toString(), started: existsSync(marker) };
  };
  const refused = (path: string, why: string) => `gpumem-tui: cannot write the line profile (GPUMEM_PROFILE_JSON) to ${path}: ${why}; the program was not started\n`;

  test("a link planted at <output>.lines.json: refused, its target untouched, no output written", () => {
    const d = shared();
    const victim = join(mkdtempSync(join(tmpdir(), "gpumem-victim-")), "notes.txt");
    writeFileSync(victim, "precious");
    symlinkSync(victim, join(d, "x.lines.json"));
    const r = run(d, ["--output", join(d, "x.ndjson")]);
    expect(r).toEqual({ code: 1, err: refused(join(d, "x.lines.json"), "it is a symbolic link (never followed)"), started: false });
    expect(readFileSync(victim, "utf8")).toBe("precious");
    expect(readlinkSync(join(d, "x.lines.json"))).toBe(victim);
    expect(existsSync(join(d, "x.ndjson"))).toBe(false);
  });

  test("a FIFO at the default name in the working directory, and at GPUMEM_PROFILE_JSON: refused at once", () => {
    const d = shared();
    expect(Bun.spawnSync(["mkfifo", join(d, "gpumem-tui-run.lines.json")]).exitCode).toBe(0);
    const r = run(d, []);
    expect(r).toEqual({ code: 1, err: refused("gpumem-tui-run.lines.json", "not a regular file (a FIFO)"), started: false });
    expect(lstatSync(join(d, "gpumem-tui-run.lines.json")).isFIFO()).toBe(true);
    const named = join(d, "gpumem-tui-run.lines.json");
    expect(run(d, [], { GPUMEM_PROFILE_JSON: named })).toEqual({ code: 1, err: refused(named, "not a regular file (a FIFO)"), started: false });
  });

  test("a name in a directory that does not exist: refused; a file of ours there: the program runs", () => {
    const d = shared();
    const missing = join(d, "nowhere", "x.lines.json");
    expect(run(d, [], { GPUMEM_PROFILE_JSON: missing })).toEqual({ code: 1, err: refused(missing, "its directory does not exist"), started: false });
    writeFileSync(join(d, "x.lines.json"), "[]", { mode: 0o600 });
    const ok = run(d, ["--output", join(d, "x.ndjson")]);
    expect([ok.code, ok.started]).toEqual([0, true]);
  });
});
