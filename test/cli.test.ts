// The command line as a user or a script meets it.
import { describe, expect, test } from "bun:test";
import { DocumentSchema } from "../src/system/schema";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onGpu } from "./support/gpu";
import { produce } from "./support/native";

const CLI = `${import.meta.dir}/../src/cli.ts`;

function run(args: string[], env: Record<string, string> = {}) {
  const p = Bun.spawnSync(["bun", CLI, ...args], { env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

describe("gpumem-tui --json", () => {
  test("--json --once prints one document that matches the schema", () => {
    const { code, out, err } = run(["--json", "--once"]);
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(out.trim().split("\n")).toHaveLength(1);
    const doc = DocumentSchema.parse(JSON.parse(out));
    expect(doc.version).toBe(2);
    if (onGpu) {
      expect(doc.devices.length).toBeGreaterThan(0);
      expect(doc.reason).toBeNull();
      expect(Number.isInteger(doc.devices[0]!.memory_total_bytes)).toBe(true);
    } else {
      // No GPU here: an empty list and the reason, still exit 0.
      expect(doc.devices).toEqual([]);
      expect(doc.reason).toMatch(/no NVIDIA driver|no devices|libgpumem/);
    }
  });

  test("--json --interval streams one JSON line per sample; `| head -n 3` ends it quietly", () => {
    const p = Bun.spawnSync(["bash", "-c", `set -o pipefail; bun ${CLI} --json --interval 50 | head -n 3`], { stderr: "pipe" });
    expect(p.stderr.toString()).toBe("");
    expect(p.exitCode).toBe(0);
    const lines = p.stdout.toString().trim().split("\n");
    expect(lines).toHaveLength(3);
    const times = lines.map((l) => DocumentSchema.parse(JSON.parse(l)).time_unix_ms);
    expect(times[2]! - times[0]!).toBeGreaterThanOrEqual(90);
  });

  test("SIGINT ends the stream with status 0 after whole lines only", async () => {
    const p = Bun.spawn(["bun", CLI, "--json", "--interval", "50"], { stdout: "pipe", stderr: "pipe" });
    // Once the stream runs (a whole first document is out; a fixed 700 ms could pass before a
    // loaded machine had started bun), SIGINT in its middle.
    const reader = p.stdout.getReader();
    const text = new TextDecoder();
    let out = "";
    while (!out.includes("\n")) {
      const r = await reader.read();
      if (r.done) break;
      out += text.decode(r.value, { stream: true });
    }
    p.kill("SIGINT");
    expect(await p.exited).toBe(0);
    for (let r = await reader.read(); !r.done; r = await reader.read()) out += text.decode(r.value, { stream: true });
    expect(out).toContain("\n");
    expect(out.endsWith("\n")).toBe(true);
    for (const line of out.trim().split("\n")) DocumentSchema.parse(JSON.parse(line));
  });
  test("SIGTERM in the middle of an hour-long wait ends the stream at once, status 0", async () => {
    const p = Bun.spawn(["bun", CLI, "--json", "--interval", "3600000"], { stdout: "pipe", stderr: "pipe" });
    const reader = p.stdout.getReader();
    const first = await reader.read(); // the first document is out: the stream now waits an hour
    expect(first.done).toBe(false);
    const t0 = performance.now();
    p.kill("SIGTERM");
    expect(await p.exited).toBe(0);
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});

describe("gpumem-tui --json with an agent", () => {
  test("a process with the agent shows its allocator totals; one NVML does not list is marked so", () => {
    const dir = join(mkdtempSync(join(tmpdir(), "gpumem-cli-")), "agents");
    mkdirSync(dir, { mode: 0o700 });
    const proc = Bun.spawn(["sleep", "30"]);
    try {
      produce(join(dir, `${proc.pid}.ring`), 64, 11, "--pid", proc.pid);
      const manifest = { version: 1, pid: proc.pid, cmdline: ["python", "train.py"], rank: 3, devices: [0], torch_version: "2.11.0", hook_mode: "hook", ring: join(dir, `${proc.pid}.ring`), socket: join(dir, `${proc.pid}.sock`) };
      writeFileSync(join(dir, `${proc.pid}.json`), JSON.stringify(manifest));
      const { code, out } = run(["--json", "--once"], { GPUMEM_TUI_DIR: dir });
      expect(code).toBe(0);
      const doc = DocumentSchema.parse(JSON.parse(out));
      const p = doc.processes.find((x) => x.pid === proc.pid)!;
      expect(p.nvml_visible).toBe(false);
      expect(p.used_bytes).toBeNull();
      expect(p.name).toBe("sleep");
      expect(p.pytorch).toMatchObject({ hook_mode: "hook", allocated_bytes: 3072, alloc_count: 6, rank: 3, torch_version: "2.11.0", non_pytorch_bytes: null });
      expect(doc.warnings).toEqual([]);
      // A second agent whose ring is of another ABI: skipped, and the document says why.
      const other = Bun.spawn(["sleep", "30"]);
      produce(join(dir, `${other.pid}.ring`), 64, 1, "--abi", "7", "--pid", other.pid);
      writeFileSync(join(dir, `${other.pid}.json`), JSON.stringify({ ...manifest, pid: other.pid, ring: join(dir, `${other.pid}.ring`) }));
      const again = DocumentSchema.parse(JSON.parse(run(["--json", "--once"], { GPUMEM_TUI_DIR: dir }).out));
      other.kill();
      expect(again.processes.map((x) => x.pid)).toEqual([proc.pid]);
      expect(again.warnings).toHaveLength(1);
      expect(again.warnings[0]).toMatch(new RegExp(`^agent of pid ${other.pid}: ring .* has ABI version 7, this monitor reads versions 1 and 2`));
    } finally {
      proc.kill();
    }
  });
});

describe("gpumem-tui errors and schema", () => {
  test.each([
    [["--interval", "abc"], /--interval takes a whole number of milliseconds, at least 50 and at most 86400000 \(a day\) \(got "abc"\)/],
    [["--interval", "10"], /at least 50 and at most 86400000 \(a day\) \(got "10"\)/],
    [["--json", "--interval", "99999999999"], /at most 86400000 \(a day\) \(got "99999999999"\)/],
    [["--once"], /--once goes with --json/],
    [["--json", "--once", "--interval", "100"], /exclude each other/],
    [["--bogus"], /^unknown option --bogus$/],
    [["frobnicate"], /unknown command "frobnicate"/],
    [["--interval", "-5"], /^--interval takes a whole number of milliseconds, at least 50 and at most 86400000 \(a day\) \(got "-5"\)$/],
    [["--interval"], /^--interval needs a value: --interval MS$/],
    [["--json=yes"], /^--json takes no value$/],
    [["serve", "--port", "-1"], /^--port takes a port number, 1 to 65535 \(got "-1"\)$/],
    [["--dump-dir", "/nonexistent/dir"], /^--dump-dir \/nonexistent\/dir: no such directory$/],
    [["--dump-dir", "package.json"], /^--dump-dir package.json is not a directory$/],
    [["--json", "--dump-dir", "."], /^--dump-dir goes with the screens/],
  ] as const)("%p is refused with status 2: what is wrong first, in one line, then where the usage is", (args, message) => {
    const { code, out, err } = run([...args]);
    expect(code).toBe(2);
    expect(out).toBe("");
    const lines = err.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]!.replace(/^gpumem-tui: /, "")).toMatch(message);
    expect(lines[1]).toBe("Run 'gpumem-tui --help' for the usage.");
  });

  test("serve on a host that does not exist, or a port in use: one line in words, no socket jargon", async () => {
    const bad = run(["serve", "--host", "bad.invalid"]);
    expect(bad.code).toBe(1);
    expect(bad.err.trim()).toBe("gpumem-tui: cannot listen on bad.invalid:9464: bad.invalid is not a host name or address of this machine (--host 0.0.0.0 listens on all of them)");
    const busy = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    try {
      const inUse = run(["serve", "--host", "127.0.0.1", "--port", String(busy.port)]);
      expect(inUse.code).toBe(1);
      expect(inUse.err.trim()).toBe(`gpumem-tui: cannot listen on 127.0.0.1:${busy.port}: the port is in use by another program (--port picks another)`);
    } finally {
      busy.stop(true);
    }
  });

  test.each([
    [[], /standard input and output are not one here; for scripts: `gpumem-tui --json --once`/],
    [["replay", "test/fixtures/normal.ring"], /for scripts: `gpumem-tui replay FILE --json`/],
    [["view", "test/fixtures/normal-history.pickle"], /for scripts: `gpumem-tui view FILE --json`/],
  ] as const)("the screens with no terminal (%p, output piped): status 2 and what to type instead, not Ink's raw-mode error", (args, message) => {
    const { code, out, err } = run([...args]);
    expect(code).toBe(2);
    expect(out).toBe("");
    expect(err).toMatch(message);
    expect(err).not.toContain("Raw mode");
  });

  test("run -- CMD with no terminal refuses before it starts the program", () => {
    const marker = join(mkdtempSync(join(tmpdir(), "gpumem-cli-")), "started");
    const { code, err } = run(["run", "--", "touch", marker]);
    expect(code).toBe(2);
    expect(err).toContain("run --json --output F.ndjson -- CMD");
    expect(existsSync(marker)).toBe(false);
  });

  test("run --json with an output that cannot be written: status 1, why, and the program never starts", () => {
    const marker = join(mkdtempSync(join(tmpdir(), "gpumem-cli-")), "started");
    const { code, err } = run(["run", "--json", "--output", "/nonexistent-dir/x.ndjson", "--", "touch", marker]);
    expect(code).toBe(1);
    expect(err).toBe("gpumem-tui: cannot write the samples to /nonexistent-dir/x.ndjson: its directory does not exist; the program was not started\n");
    expect(existsSync(marker)).toBe(false);
  });

  test("run --json exits with the program's status; its last line names the program and that status", () => {
    const out = join(mkdtempSync(join(tmpdir(), "gpumem-cli-")), "run.ndjson");
    const { code } = run(["run", "--json", "--interval", "100", "--output", out, "--", "sh", "-c", "sleep 0.3; exit 3"]);
    expect(code).toBe(3);
    const lines = readFileSync(out, "utf8").trim().split("\n").map((l) => DocumentSchema.parse(JSON.parse(l)));
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.at(-1)!.program).toMatchObject({ exit_status: 3 });
    expect(lines.slice(0, -1).every((d) => d.program === undefined)).toBe(true);
  });

  test("schema prints the document's JSON Schema, and real output satisfies it", () => {
    const { code, out } = run(["schema"]);
    expect(code).toBe(0);
    const schema = JSON.parse(out);
    expect(schema.properties.version.const).toBe(2);
    expect(schema.required).toContain("devices");
    expect(schema.properties.devices.items.properties.memory_used_bytes.anyOf[0].type).toBe("integer");
  });

  test("a missing native library names the file and how to build it", () => {
    const { code, out } = run(["--json", "--once"], { GPUMEM_LIB: "/nonexistent/libgpumem.so" });
    expect(code).toBe(0);
    expect(JSON.parse(out).reason).toBe("GPUMEM_LIB=/nonexistent/libgpumem.so: no such file");
  });
});
