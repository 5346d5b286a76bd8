// CPython 3.14+ (PEP 768) without a 3.14 here: test/support/py314_image.c lays out the runtime,
// interpreters and thread states as 3.14's headers define them, and the helper (cuda/inject.c
// remote-exec) writes into it. What it wrote is read back byte by byte: the script path, the pending
// flag and the eval breaker's bit in the main thread state, nothing else; a table that is not
// 3.14's, or an interpreter that refuses, gets one line, a non-zero status and no byte written.
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { scriptText, payload } from "../../src/attach/bootstrap";
import { buildInject, HELPER_EXIT, runHelper } from "../../src/attach/helper";
import { startTicks } from "../../src/collect/procfs";
import { ROOT } from "../../src/root";
import { tmpPath } from "../support/native";
import { agentFiles, attach, probeRecords, startTarget, testEnv } from "./support";

const IMAGE = tmpPath("py314_image");
{
  const p = Bun.spawnSync(["cc", "-std=c11", "-O2", "-Wall", "-rdynamic", "-o", IMAGE, join(ROOT, "test/support/py314_image.c")], { stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`building py314_image.c failed:\n${p.stderr}`);
  const b = buildInject();
  if (!b.ok) throw new Error(b.error);
}

interface Report {
  changed: { where: string; offset: number; len: number }[];
  script_path: string;
  pending: number;
  eval_breaker: number;
  fields: { path: number; pending: number; eval_breaker: number };
}

const running: ReturnType<typeof Bun.spawn>[] = [];
afterAll(() => running.forEach((p) => p.kill()));

async function startImage(variant: string) {
  const proc = Bun.spawn([IMAGE, variant], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  running.push(proc);
  const out = proc.stdout.getReader();
  let text = "";
  while (!text.includes("ready\n")) {
    const { value, done } = await out.read();
    if (done) throw new Error(`py314_image ${variant} ended: ${text}`);
    text += new TextDecoder().decode(value);
  }
  /** What changed in the image since it said ready. */
  const report = async (): Promise<Report> => {
    proc.stdin.write("check\n");
    proc.stdin.end();
    let rest = "";
    for (;;) {
      const { value, done } = await out.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(await proc.exited).toBe(0);
    return JSON.parse(rest);
  };
  return { pid: proc.pid, report };
}

const SCRIPT = "/tmp/gpumem-agents/attach-1-0123456789ab.py";

describe("PEP 768 remote-exec against 3.14's documented layout", () => {
  test("writes the script path (NUL-ended), the pending flag and the stop bit in the main thread state, nothing else", async () => {
    const img = await startImage("ok");
    const r = await runHelper(["remote-exec", String(img.pid), SCRIPT]);
    expect(r.error).toBe("");
    expect(r.code).toBe(0);
    expect(r.fields).toMatchObject({ pid: String(img.pid), python: "3.14.0", tid: String(img.pid), via: "pep768", script: SCRIPT });
    expect(Number(r.fields.stopped_us)).toBeGreaterThan(0);
    const rep = await img.report();
    expect(rep.script_path).toBe(SCRIPT);
    expect(rep.pending).toBe(1);
    expect(rep.eval_breaker).toBe(0x101 | (1 << 5)); // the bits already set are kept
    const f = rep.fields;
    const inside = (c: Report["changed"][number]) =>
      c.where === "tstate_main" &&
      ((c.offset >= f.path && c.offset + c.len <= f.path + SCRIPT.length + 1) ||
        (c.offset >= f.pending && c.offset + c.len <= f.pending + 4) ||
        (c.offset >= f.eval_breaker && c.offset + c.len <= f.eval_breaker + 8));
    expect(rep.changed.filter((c) => !inside(c))).toEqual([]);
    // The NUL that ends the new path over the longer old one was written.
    expect(rep.changed.some((c) => c.offset <= f.path + SCRIPT.length && c.offset + c.len > f.path + SCRIPT.length)).toBe(true);
  });

  const refusals: [string, number, RegExp][] = [
    ["cookie", HELPER_EXIT.version, /^process \d+ runs Python 3\.14\.0 but no CPython debug offsets start its runtime \(no "xdebugpy" cookie\): cannot attach$/],
    ["version", HELPER_EXIT.version, /^process \d+'s debug offsets are for Python 3\.15, whose layout this build does not know \(it knows 3\.14\): start it under `gpumem-tui run`$/],
    ["layout", HELPER_EXIT.version, /^process \d+'s debug offsets disagree with CPython 3\.14's layout \(debugger_support\.debugger_script_path\): not attaching$/],
    ["disabled", HELPER_EXIT.remoteOff, /^process \d+ has remote debugging turned off \(PYTHON_DISABLE_REMOTE_DEBUG, -X disable-remote-debug, or a build --without-remote-debug\): /],
    ["pending", HELPER_EXIT.busy, /^process \d+ has a script queued earlier \(by attach or a debugger\) that has not run yet/],
    ["finalizing", HELPER_EXIT.exited, /^process \d+ is exiting \(its interpreter is finalizing\)$/],
  ];
  for (const [variant, code, line] of refusals) {
    test(`refuses in one line, writing nothing: ${variant}`, async () => {
      const img = await startImage(variant);
      const p = Bun.spawnSync([`${ROOT}/cuda/build/gpumem-inject`, "remote-exec", String(img.pid), SCRIPT], { stdout: "pipe", stderr: "pipe" });
      expect(p.exitCode).toBe(code);
      expect(p.stdout.toString()).toBe("");
      const err = p.stderr.toString();
      expect(err.split("\n").filter(Boolean).length).toBe(1);
      expect(err.replace(/^gpumem-inject: /, "").trim()).toMatch(line);
      expect((await img.report()).changed).toEqual([]);
    });
  }

  test("--start-time: a pid whose start time is not the one asked for is refused once held, nothing written; its own start time writes", async () => {
    const img = await startImage("ok");
    const start = startTicks(img.pid)!;
    const r = await runHelper(["remote-exec", String(img.pid), SCRIPT, "--start-time", String(start - 1)]);
    expect(r.code).toBe(HELPER_EXIT.notSame);
    expect(r.error).toMatch(new RegExp(`^process ${img.pid} is no longer the process asked for \\(started at [\\d.]+ s after boot, not [\\d.]+ s\\): nothing was done to it$`));
    expect((await img.report()).changed).toEqual([]);
    const same = await startImage("ok");
    const ok = await runHelper(["remote-exec", String(same.pid), SCRIPT, "--start-time", String(startTicks(same.pid))]);
    expect({ code: ok.code, error: ok.error }).toEqual({ code: 0, error: "" });
    expect((await same.report()).script_path).toBe(SCRIPT);
  });

  test("a Python before 3.14 is refused for remote-exec (it takes the pending call)", async () => {
    const t = await startTarget("serve", 0, "/nonexistent/never");
    try {
      const r = await runHelper(["remote-exec", String(t.pid), SCRIPT]);
      expect(r.code).toBe(HELPER_EXIT.version);
      expect(r.error).toMatch(/^process \d+ runs Python 3\.\d+\.\d+: PEP 768 \(remote-exec\) needs 3\.14 or newer$/);
    } finally {
      t.proc.kill();
    }
  });
});

test("attach on 3.14: the bootstrap as a 0600 script file named in the thread state; withdrawn in time, it removes itself and does nothing", async () => {
  const env = testEnv();
  const img = await startImage("ok");
  const r = await attach(img.pid, env, { timeoutS: 0.3 });
  expect(r.ok).toBe(false);
  expect(r.line).toMatch(new RegExp(`^attach ${img.pid}: no safe point within 0\\.3 s .*; it was left as it was \\(its threads were stopped [\\d.]+ ms\\); try again later$`));
  const rep = await img.report();
  // The interpreter would open this file at its safe point: ours, private, the bootstrap's text.
  const script = rep.script_path;
  expect(script).toMatch(new RegExp(`^${env.GPUMEM_TUI_DIR}/attach-${img.pid}-[0-9a-f]{12}\\.py$`));
  expect(rep.pending).toBe(1);
  expect(statSync(script).mode & 0o777).toBe(0o600);
  const token = script.replace(/\.py$/, ".token");
  const text = readFileSync(script, "utf8");
  const secret = /boot\(\\"[^"\\]*\\", \\"([0-9a-f]{32})\\"/.exec(text)?.[1];
  expect(secret).toBeDefined();
  expect(text).toBe(scriptText({ token, secret: secret!, ...payload(env), monitor: null }, script));
  expect(readdirSync(env.GPUMEM_TUI_DIR)).toEqual([script.split("/").pop()!]); // the token was withdrawn
  // The interpreter's safe point, late: python3 runs the script as 3.14 would.
  const p = Bun.spawnSync(["python3", script], { stdout: "pipe", stderr: "pipe" });
  expect({ code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() }).toEqual({ code: 0, out: "", err: "" });
  expect(agentFiles(env)).toEqual([]);
  expect(probeRecords(env, p.pid)).toEqual([]);
});
