// The engine settings a monitor that runs a while starts itself with (src/engine.ts): the process is
// started again in place (the same pid) with them, takes them out of its environment before it runs
// anything (nothing it starts inherits them), and JavaScriptCore knows each of them by that name
// (an option it does not know is ignored with only a warning). Brief command lines start once.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ENGINE_SETTINGS } from "../src/engine";

const ROOT = join(import.meta.dir, "..");
const cli = join(ROOT, "src", "cli.ts");
/** The environment without any of the settings or the mark (as a user's shell has it). */
function plainEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("BUN_JSC_") && k !== "GPUMEM_TUI_ENGINE") env[k] = v;
  return { ...env, ...extra };
}

/** A script in a new folder that appends `logged` (an expression) to its log, starts itself with
 *  the settings, then runs `after`: each start of the process leaves a line in the log. */
function startScript(logged: string, after: string): { dir: string; log: string; script: string } {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-engine-"));
  const log = join(dir, "log");
  const script = join(dir, "start.ts");
  writeFileSync(
    script,
    `import { appendFileSync } from "node:fs";
import { startWithEngineSettings } from ${JSON.stringify(join(ROOT, "src", "engine.ts"))};
appendFileSync(${JSON.stringify(log)}, ${logged});
startWithEngineSettings();
${after}`,
  );
  return { dir, log, script };
}

describe("the engine settings", () => {
  test("JavaScriptCore takes each of them by its name, as set", () => {
    const r = Bun.spawnSync([process.execPath, "-e", "0"], { env: plainEnv({ ...ENGINE_SETTINGS, BUN_JSC_dumpOptions: "2" }), stderr: "pipe", stdout: "pipe" });
    const dump = r.stdout.toString() + r.stderr.toString();
    for (const [name, value] of Object.entries(ENGINE_SETTINGS)) {
      const option = name.slice("BUN_JSC_".length);
      const want = value === "0" ? "false" : value === "1" ? "true" : value;
      expect(dump, option).toMatch(new RegExp(`\\b${option}=${want} \\(default: `));
    }
  });

  test("a process started again in place with them, which takes them out before it runs anything", () => {
    const { log, script } = startScript(
      `JSON.stringify({ pid: process.pid, settings: Object.keys(process.env).filter((k) => k.startsWith("BUN_JSC_") || k === "GPUMEM_TUI_ENGINE") }) + "\\n"`,
      `const child = Bun.spawnSync(["sh", "-c", "env"], { env: process.env }).stdout.toString();
console.log(JSON.stringify({ pid: process.pid, env: Object.keys(process.env).filter((k) => k.startsWith("BUN_JSC_") || k === "GPUMEM_TUI_ENGINE"), child: child.split("\\n").filter((l) => /^(BUN_JSC_|GPUMEM_TUI_ENGINE=)/.test(l)) }));`,
    );
    const r = Bun.spawnSync([process.execPath, script], { env: plainEnv(), stdout: "pipe", stderr: "pipe" });
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    const starts = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { pid: number; settings: string[] });
    // Twice in the same process: as it was started, then with the settings and the mark.
    expect(starts).toHaveLength(2);
    expect(starts[1]!.pid).toBe(starts[0]!.pid);
    expect(starts[0]!.settings).toEqual([]);
    expect(starts[1]!.settings.sort()).toEqual([...Object.keys(ENGINE_SETTINGS), "GPUMEM_TUI_ENGINE"].sort());
    const out = JSON.parse(r.stdout.toString().trim()) as { pid: number; env: string[]; child: string[] };
    expect(out.pid).toBe(starts[0]!.pid);
    expect(out.env).toEqual([]);
    expect(out.child).toEqual([]);
  });

  test("a setting the user made stays theirs; GPUMEM_TUI_ENGINE=off starts once", () => {
    const { log, script } = startScript(`"start\\n"`, `console.log(JSON.stringify(Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("BUN_JSC_")))));`);
    const [first, ...rest] = Object.keys(ENGINE_SETTINGS) as [string, ...string[]];
    const r = Bun.spawnSync([process.execPath, script], { env: plainEnv({ [first]: "12345" }), stdout: "pipe" });
    expect(JSON.parse(r.stdout.toString())).toEqual({ [first]: "12345" });
    expect(readFileSync(log, "utf8")).toBe(rest.length > 0 ? "start\nstart\n" : "start\n");
    writeFileSync(log, "");
    const off = Bun.spawnSync([process.execPath, script], { env: plainEnv({ GPUMEM_TUI_ENGINE: "off" }), stdout: "pipe" });
    expect(JSON.parse(off.stdout.toString())).toEqual({});
    expect(readFileSync(log, "utf8")).toBe("start\n");
  });

  test("the monitor's command lines: a program under `run` inherits none of them; brief ones start once", () => {
    const dir = mkdtempSync(join(tmpdir(), "gpumem-engine-"));
    const r = Bun.spawnSync([process.execPath, cli, "run", "--json", "--output", join(dir, "run.ndjson"), "--", "sh", "-c", "env"], { env: plainEnv({ GPUMEM_TUI_DIR: join(dir, "agents") }), stdout: "pipe", stderr: "pipe", cwd: dir });
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    const lines = r.stdout.toString().split("\n");
    expect(lines.some((l) => l.startsWith("PATH="))).toBe(true);
    expect(lines.filter((l) => /^(BUN_JSC_|GPUMEM_TUI_ENGINE=)/.test(l))).toEqual([]);
    // How many times the engine started: JavaScriptCore lists its options at each start.
    const starts = (...args: string[]) => {
      const p = Bun.spawnSync([process.execPath, cli, ...args], { env: plainEnv({ BUN_JSC_dumpOptions: "2" }), stdout: "pipe", stderr: "pipe", cwd: dir });
      return (p.stdout.toString() + p.stderr.toString()).split("All JSC options:").length - 1;
    };
    expect(starts("--version")).toBe(1);
    expect(starts("schema")).toBe(1);
    expect(starts("replay", join(dir, "no-such.ring"))).toBe(2);
    // Under Bun's sampling profiler a monitor starts once: a signal of the profiler's pending at
    // execve would kill the new process (status 158) before its handlers are in place.
    const prof = Bun.spawnSync([process.execPath, "--cpu-prof", `--cpu-prof-dir=${join(dir, "prof")}`, cli, "replay", join(dir, "no-such.ring")], { env: plainEnv({ BUN_JSC_dumpOptions: "2" }), stdout: "pipe", stderr: "pipe", cwd: dir });
    expect(prof.exitCode, prof.stderr.toString()).toBe(1);
    expect((prof.stdout.toString() + prof.stderr.toString()).split("All JSC options:").length - 1).toBe(1);
  });
});
