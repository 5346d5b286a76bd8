// The bundle the package runs (dist/cli.js, `bun run build:bundle`): the same command line as the
// sources, the same files found from it, and `--json --once` loading none of the screens' code.
import { beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import pkg from "../package.json";
import { ROOT } from "../src/root";
import { DocumentSchema } from "../src/system/schema";
import { holdDist } from "./support/dist-lock";
import { onGpu } from "./support/gpu";
import { cannot, demoDrawnThenQuit, q, terminal } from "./support/tmux";

holdDist(); // dist/ is rebuilt here: not while the other file that builds it runs
const DIST = join(ROOT, "dist");
const ENTRY = join(DIST, pkg.bin["gpumem-tui"].replace(/^dist\//, ""));

function run(entry: string, args: string[]) {
  const p = Bun.spawnSync(["bun", entry, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

/** The files `file` loads before any of its code runs: its static imports, transitively. */
function staticClosure(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  const text = readFileSync(file, "utf8");
  // Static imports only (`import{a}from"./x.js"`, `import"./x.js"`); `import("./x.js")` is lazy.
  for (const m of text.matchAll(/(?:^|[;\n}])\s*import\s*(?:[^"'();]*?\bfrom\s*)?["'](\.\/[^"']+)["']/g)) {
    staticClosure(join(DIST, m[1]!), seen);
  }
  return seen;
}

/** strace, where it is there and may trace (a container can forbid ptrace). */
const STRACE = Bun.which("strace") !== null && Bun.spawnSync(["strace", "-o", "/dev/null", "true"]).exitCode === 0;

/**
 * The order of a run's first steps, from strace: the module files the process opened, in order,
 * and where among them the thread that loads libnvidia-ml.so.1 (NVML's warm-up) was created.
 * `modules`: the files opened before that thread started; `after`: the first one after it.
 */
/** The files `entry` asks for by dynamic import (`import("./…")`), as paths. */
function dynamicImports(entry: string): string[] {
  const dir = dirname(entry);
  return [...readFileSync(entry, "utf8").matchAll(/import\("(\.[^"]+)"\)/g)].map((m) => {
    const f = join(dir, m[1]!);
    return /\.[jt]sx?$/.test(f) ? f : `${f}.ts`;
  });
}

function warmUpOrder(entry: string): { modules: string[]; after: string | undefined; started: boolean } {
  const log = join(mkdtempSync(join(tmpdir(), "gpumem-strace-")), "trace");
  Bun.spawnSync(["strace", "-f", "-e", "trace=openat,clone,clone3", "-o", log, "bun", entry, "--json", "--once"], { stdout: "pipe", stderr: "pipe" });
  const lines = readFileSync(log, "utf8").split("\n");
  // The threads that looked for libnvidia-ml.so: the warm-up's, and the main thread too where the
  // driver is missing (Nvml.open tries again; on a loaded machine it can try before the warm-up
  // thread first runs, which once failed CI). The warm-up's is the one a clone made: its clone's
  // line holds the new thread's id (whole, or resumed after other threads' lines).
  const nvmlTids = new Set(lines.filter((l) => l.includes("libnvidia-ml.so")).map((l) => l.split(/\s+/)[0]!));
  const createdTid = (l: string) => (/clone3?\(|<\.\.\. clone3? resumed>/.test(l) ? /(?:= |\[)(\d+)\]?(?:,|$)/.exec(l)?.[1] : undefined);
  const clone = lines.findIndex((l) => nvmlTids.has(createdTid(l) ?? ""));
  const opened = (l: string) => /openat\(AT_FDCWD, "([^"]+\.(?:js|ts))"/.exec(l)?.[1];
  const modules = lines.slice(0, Math.max(clone, 0)).flatMap((l) => opened(l) ?? []);
  const after = lines.slice(clone + 1).map(opened).find((f) => f !== undefined && !modules.includes(f));
  return { modules: [...new Set(modules)], after, started: clone >= 0 };
}

beforeAll(() => {
  const p = Bun.spawnSync(["bun", "run", "build:bundle"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`bun run build:bundle failed: ${p.stderr}`);
}, 60_000);

describe("the bundle (dist/cli.js, the package's bin)", () => {
  test("is what package.json's bin names, and starts with a bun shebang", () => {
    expect(pkg.bin["gpumem-tui"]).toBe("dist/cli.js");
    expect(readFileSync(ENTRY, "utf8").split("\n")[0]).toBe("#!/usr/bin/env bun");
  });

  test("--json --once prints the same document as the sources, and finds libgpumem.so from dist/", () => {
    const bundled = run(ENTRY, ["--json", "--once"]);
    const source = run(join(ROOT, "src", "cli.ts"), ["--json", "--once"]);
    expect(bundled.err).toBe("");
    expect(bundled.code).toBe(0);
    const doc = DocumentSchema.parse(JSON.parse(bundled.out));
    const src = JSON.parse(source.out);
    expect(Object.keys(doc)).toEqual(Object.keys(src));
    expect(doc.reason).toBe(src.reason);
    expect(doc.devices.map((d) => d.uuid)).toEqual(src.devices.map((d: { uuid: string }) => d.uuid));
    // Found from dist/ as from src/: the library loaded, so what is left is the GPU or its absence.
    if (onGpu) expect(doc.reason).toBeNull();
    else expect(doc.reason).toBe("no NVIDIA driver (libnvidia-ml.so.1) on this machine");
  });

  test("--json --once loads none of the screens' code: no ink, react or zod before its own lazy imports", () => {
    const eager = staticClosure(ENTRY);
    const code = [...eager].map((f) => readFileSync(f, "utf8")).join("\n");
    expect(code).toContain("process.dlopen"); // the NVML warm-up is there, from the start
    expect(code).not.toContain('Symbol.for("react.'); // react
    expect(code).not.toContain("yoga"); // ink's layout engine
    expect(code).not.toContain("ZodError"); // zod
    const eagerBytes = [...eager].reduce((n, f) => n + statSync(f).size, 0);
    const allBytes = readdirSync(DIST).reduce((n, f) => n + statSync(join(DIST, f)).size, 0);
    expect(eagerBytes).toBeLessThan(allBytes / 10);
  });

  test("the entry's static imports are NVML's warm-up and the library's lookup only: no node:fs, no node:path, no bun:ffi, a few KB", () => {
    const eager = [...staticClosure(ENTRY)];
    const code = eager.map((f) => readFileSync(f, "utf8")).join("\n");
    // Node's fs and path cost ~3 ms of start-up together, bun:ffi and a bound symbol ~1.4 ms: none
    // before the thread starts (libgpumem's Node-API entry starts it, cuda/warm_up_napi.c).
    expect([...code.matchAll(/\bfrom\s*"([^".][^"]*)"/g)].map((m) => m[1])).toEqual([]);
    expect(code).toContain("process.dlopen");
    expect(eager.reduce((n, f) => n + statSync(f).size, 0)).toBeLessThan(4096);
    // The entry starts the warm-up, then loads the command line by dynamic import (before both, only
    // a monitor that runs a while imports the engine's settings, src/engine.ts, to start again).
    const entry = readFileSync(ENTRY, "utf8");
    expect(entry.indexOf("warmUp(")).toBeGreaterThan(0);
    expect(entry.search(/import\("[^"]*main-/)).toBeGreaterThan(entry.indexOf("warmUp("));
    expect([...entry.matchAll(/import\("([^"]+)"\)/g)].map((m) => m[1]!).filter((f, i, all) => entry.indexOf(`import("${f}")`) < entry.indexOf("warmUp(") && all.indexOf(f) === i)).toEqual([expect.stringMatching(/engine-/)]);
  });

  (STRACE ? test : test.skip)(`NVML's warm-up thread starts before any module but the entry's own is read: the bundle and the sources${STRACE ? "" : " (needs strace that may trace)"}`, () => {
    const bundle = warmUpOrder(ENTRY);
    expect(bundle.started).toBe(true);
    expect(bundle.modules.map((f) => f.replace(/.*\/dist\//, "")).sort()).toEqual([...staticClosure(ENTRY)].map((f) => f.replace(/.*\/dist\//, "")).sort());
    // Then what the entry asks for by dynamic import, loaded while NVML starts: the command line, and
    // for a one-shot its modules, asked for together (whichever is read first).
    expect(dynamicImports(ENTRY)).toContain(bundle.after!);
    const sources = warmUpOrder(join(ROOT, "src", "cli.ts"));
    expect(sources.started).toBe(true);
    expect(sources.modules.map((f) => f.replace(`${ROOT}/`, "")).sort()).toEqual(["src/cli.ts", "src/ffi/locate.ts", "src/ffi/warm-up.ts", "src/root.ts"]);
    expect(dynamicImports(join(ROOT, "src", "cli.ts"))).toContain(sources.after!);
    expect(dynamicImports(join(ROOT, "src", "cli.ts"))).toContain(join(ROOT, "src", "commands", "main.ts"));
  });

  (STRACE ? test : test.skip)(`--json --once with no agent opens no file holding zod, ink or React: zod is loaded at a manifest's first read${STRACE ? "" : " (needs strace that may trace)"}`, () => {
    const dir = mkdtempSync(join(tmpdir(), "gpumem-strace-"));
    const agents = mkdtempSync(join(tmpdir(), "gpumem-agents-")); // private and empty: no manifest to read
    const log = join(dir, "trace");
    const p = Bun.spawnSync(["strace", "-f", "-e", "trace=openat", "-o", log, "bun", ENTRY, "--json", "--once"], { stdout: "pipe", stderr: "pipe", env: { ...process.env, GPUMEM_TUI_DIR: agents } });
    expect(p.exitCode).toBe(0);
    const opened = [...new Set([...readFileSync(log, "utf8").matchAll(/openat\(AT_FDCWD, "([^"]+\/dist\/[^"]+\.js)", [^)]*\) = \d/g)].map((m) => m[1]!))];
    rmSync(dir, { recursive: true });
    rmSync(agents, { recursive: true });
    expect(opened).toContain(ENTRY);
    const holding = opened.filter((f) => /ZodError|Symbol\.for\("react\.|yoga/.test(readFileSync(f, "utf8"))).map((f) => f.replace(/.*\/dist\//, ""));
    expect(holding).toEqual([]);
  });

  test("holds React's production build and JSX compiled for it, whatever NODE_ENV the build ran under", () => {
    const code = readdirSync(DIST).map((f) => readFileSync(join(DIST, f), "utf8")).join("\n");
    const has = (what: string) => code.includes(what);
    expect({ production: has("require_react_reconciler_production"), development: has("require_react_reconciler_development"), jsxDEV: has("jsxDEV(") }).toEqual({ production: true, development: false, jsxDEV: false });
  });

  test("the other commands run from it: --version, schema, a usage error", () => {
    expect(run(ENTRY, ["--version"]).out).toBe(`${pkg.version}\n`);
    const schema = run(ENTRY, ["schema"]);
    expect(schema.code).toBe(0);
    expect(JSON.parse(schema.out).title).toBe("gpumem-tui sample");
    const bad = run(ENTRY, ["--interval", "5"]);
    expect(bad.code).toBe(2);
    expect(bad.err.split("\n")[0]).toBe('gpumem-tui: --interval takes a whole number of milliseconds, at least 50 and at most 86400000 (a day) (got "5")');
  });

  test("run injects the package's own agent from it", () => {
    const out = join(mkdtempSync(join(tmpdir(), "gpumem-bundle-")), "run.ndjson");
    const p = run(ENTRY, ["run", "--json", "--output", out, "--interval", "50", "--", "sh", "-c", 'echo "$PYTHONPATH"']);
    expect(p.code).toBe(0);
    const agent = join(ROOT, "agent");
    expect(p.out.trim().split(":").slice(0, 2)).toEqual([join(agent, "gpumem_agent", "_inject"), agent]);
    expect(readFileSync(out, "utf8").trim().split("\n").length).toBeGreaterThan(0);
  });
});

// Bun takes its JSX settings from the current directory's tsconfig.json, so a run started outside
// the checkout once compiled the screens for React's development build while loading its
// production one ("jsxDEV… is not a function" before the first frame). A real terminal, a folder
// outside the checkout, the demo drawn and `q` leaving with 0: from the sources and from the bundle.
describe("the demo, started from a folder outside the checkout", () => {
  const entries = [
    ["the sources (bun …/src/cli.ts)", join(ROOT, "src", "cli.ts")],
    ["the bundle (bun …/dist/cli.js)", ENTRY],
  ] as const;
  for (const [i, [name, entry]] of entries.entries()) {
    (cannot ? test.skip : test)(`${name}: the Overview is drawn and q exits 0${cannot ? ` (${cannot})` : ""}`, async () => {
      const away = mkdtempSync(join(tmpdir(), "gpumem-away-"));
      expect(away.startsWith(`${ROOT}/`)).toBe(false);
      // NODE_ENV unset, as in a user's shell: the case that failed.
      const t = terminal(`away-${i}`, `cd ${q(away)} && env -u NODE_ENV ${q(process.execPath)} ${q(entry)} --demo`, 120, 30);
      try {
        await demoDrawnThenQuit(t);
        expect(t.pane()).not.toContain("is not a function");
      } finally {
        t.close();
        rmSync(away, { recursive: true, force: true });
      }
    });
  }
});
