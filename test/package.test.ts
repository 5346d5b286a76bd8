// The packed tarball, installed in an empty directory, as a user gets it from `bunx gpumem-tui`.
import { beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, realpathSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../src/ffi/build";
import { holdDist } from "./support/dist-lock";
import { onGpu } from "./support/gpu";
import { cannot, demoDrawnThenQuit, q, terminal } from "./support/tmux";

// The GPU machine reaches no package registry: there the install cannot run (CI runs it).
const OFFLINE = onGpu;
const offlineTest = (name: string, fn: () => void) =>
  OFFLINE ? test.skip(`${name} (the GPU machine reaches no npm registry to install from; CI runs it)`, fn) : test(name, fn);

holdDist(); // dist/ is rebuilt here: not while the other file that builds it runs
const dir = mkdtempSync(join(tmpdir(), "gpumem-pack-"));
const app = join(dir, "app");
const onlyBun = join(dir, "bin"); // a PATH with Bun and no C compiler
const installed = join(app, "node_modules", "gpumem-tui");

function sh(cmd: string[], cwd: string, env: Record<string, string> = {}) {
  const p = Bun.spawnSync(cmd, { cwd, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

function gpumem(args: string[], path = onlyBun) {
  return sh([join(onlyBun, "bun"), "x", "gpumem-tui", ...args], app, { PATH: path });
}

beforeAll(() => {
  if (OFFLINE) return;
  mkdirSync(app);
  mkdirSync(onlyBun);
  symlinkSync(realpathSync(process.execPath), join(onlyBun, "bun"));
  const pack = sh(["bun", "pm", "pack", "--destination", dir], ROOT);
  if (pack.code !== 0) throw new Error(`bun pm pack failed: ${pack.err}`);
  const tgz = readdirSync(dir).find((f) => f.endsWith(".tgz"))!;
  writeFileSync(join(app, "package.json"), '{"name":"app","private":true}');
  const add = sh(["bun", "add", join(dir, tgz)], app);
  if (add.code !== 0) throw new Error(`installing the tarball failed: ${add.err}`);
}, 120_000);

describe("the packed tarball", () => {
  offlineTest("holds the bundle the bin runs, the sources, the agent, the native sources, the demo recording and a prebuilt libgpumem.so", () => {
    const files = sh(["find", ".", "-type", "f"], installed).out;
    for (const f of ["./dist/cli.js", "./src/cli.ts", "./cuda/gpumem_ring.h", "./cuda/nvml.c", "./cuda/hook.cpp", "./cuda/pystack.c", "./cuda/pystack.h", "./agent/gpumem_agent/__init__.py", "./agent/gpumem_agent/_inject/sitecustomize.py", "./prebuilt/linux-x64/libgpumem.so", "./prebuilt/linux-x64/build-id", "./README.md"]) {
      expect(files).toContain(f);
    }
    expect(files).not.toContain("./cuda/build/");
    // The demo: a GPT-2 training recorded on an H100, its manifest, its tensor names and its NVML track.
    for (const f of ["demo.ring.gz", "demo.json", "demo.names.json", "demo.nvml.ndjson", "README.md"]) expect(files).toContain(`./demo/${f}`);
    expect(files).not.toContain("./test/"); // tests and their fixtures stay out of the package
    expect(files).not.toContain(".test.ts");
  });

  offlineTest("`bunx gpumem-tui --json --once` works on a machine with no C compiler", () => {
    const { code, out, err } = gpumem(["--json", "--once"]);
    expect(err).toBe("");
    expect(code).toBe(0);
    const doc = JSON.parse(out);
    expect(doc.version).toBe(2);
    // The prebuilt library loaded: what remains is the GPU (or its absence), not the build.
    if (doc.reason !== null) expect(doc.reason).toBe("no NVIDIA driver (libnvidia-ml.so.1) on this machine");
  });

  // The folder the user is in holds no tsconfig.json or bunfig.toml of ours: the screens must not
  // depend on them (src/cli.ts, package.json's build:bundle). A real terminal, `q` exits 0.
  for (const [i, [name, line]] of ([
    ["`bunx gpumem-tui --demo`", `${q(join(onlyBun, "bun"))} x gpumem-tui --demo`],
    ["the shipped sources, `bun node_modules/gpumem-tui/src/cli.ts --demo`", `${q(join(onlyBun, "bun"))} node_modules/gpumem-tui/src/cli.ts --demo`],
  ] as const).entries()) {
    (cannot ? test.skip : offlineTest)(`${name}, from the folder it is installed in: the Overview is drawn and q exits 0${cannot ? ` (${cannot})` : ""}`, async () => {
      const t = terminal(`pack-demo-${i}`, `cd ${q(app)} && env -u NODE_ENV PATH=${q(onlyBun)} ${line}`, 120, 30);
      try {
        await demoDrawnThenQuit(t);
      } finally {
        t.close();
      }
    });
  }

  offlineTest("a prebuilt built from other sources is not trusted: rebuilt where a compiler exists, else a clear message", () => {
    // Replaced, not written through: bun links installed files to its global cache, and writing
    // into the link would change the cached package for every later install.
    const buildId = join(installed, "prebuilt", "linux-x64", "build-id");
    unlinkSync(buildId);
    writeFileSync(buildId, "not-these-sources\n");
    const without = gpumem(["--json", "--once"]);
    expect(without.code).toBe(0);
    expect(JSON.parse(without.out).reason).toMatch(
      /^the prebuilt libgpumem.so for linux-x64 was built from other sources, and libgpumem.so is not built and no C compiler was found: install one \(e.g. `apt install gcc`\), then run `bun run build:native`/,
    );
    const withCc = gpumem(["--json", "--once"], `${onlyBun}:${process.env.PATH}`);
    expect(withCc.code).toBe(0);
    const reason = JSON.parse(withCc.out).reason;
    if (reason !== null) expect(reason).toBe("no NVIDIA driver (libnvidia-ml.so.1) on this machine");
    expect(sh(["ls", "cuda/build"], installed).out).toContain("libgpumem.so");
  });
});
