// Start-up laziness lives in one place, the commands (src/commands/*, and src/cli.ts before them):
// anywhere else an import is static, so that a file's imports show its real dependencies. One
// exception, named here: zod, which only validation needs, is required through src/system/zod.ts
// where a schema is first built (manifest.ts), so that a start that validates nothing does not load
// it (zod alone was a fifth of `gpumem-tui --json --once`).
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../src/root";

/** The one lazy load allowed outside the commands: zod, at a schema's first use. */
const ZOD_AT_FIRST_USE = /^const \w+ = \(z = \(require\("\.\/zod"\) as typeof import\("\.\/zod"\)\)\.z\) =>$/;

test("no require() or await import() outside src/commands and src/cli.ts, but zod's at a schema's first use", () => {
  const found: string[] = [];
  for (const f of new Bun.Glob("src/**/*.{ts,tsx}").scanSync(ROOT)) {
    if (f.startsWith("src/commands/") || f === "src/cli.ts") continue;
    readFileSync(join(ROOT, f), "utf8")
      .split("\n")
      .forEach((line, i) => {
        if (f.startsWith("src/system/") && ZOD_AT_FIRST_USE.test(line)) return;
        if (/\brequire\(|await import\(/.test(line)) found.push(`${f}:${i + 1}: ${line.trim()}`);
      });
  }
  expect(found).toEqual([]);
});

/** The modules a run of `main(argv)` from the sources has loaded by its end, relative to the root
 *  (node_modules' by package), with `env`. Its own process: this one has loaded everything. */
function modulesLoaded(argv: string[], env: Record<string, string>): string[] {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-lazy-"));
  const script = join(dir, "loaded.ts");
  writeFileSync(
    script,
    `const { main } = await import(${JSON.stringify(join(ROOT, "src/commands/main.ts"))});
const code = await main(${JSON.stringify(argv)});
require("node:fs").writeFileSync(${JSON.stringify(join(dir, "loaded.json"))}, JSON.stringify({ code, modules: Object.keys(require.cache) }));
`,
  );
  const p = Bun.spawnSync(["bun", script], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  expect(p.stderr.toString()).toBe("");
  const { code, modules } = JSON.parse(readFileSync(join(dir, "loaded.json"), "utf8")) as { code: number; modules: string[] };
  rmSync(dir, { recursive: true });
  expect(code).toBe(0);
  const named = modules.map((m) => m.replace(`${ROOT}/`, "").replace(/^node_modules\/((?:@[^/]+\/)?[^/]+)\/.*/, "node_modules/$1"));
  return [...new Set(named)].sort();
}

test("--json --once with no agent loads what its document needs: no zod, ink or React, no model, no screens", () => {
  const agents = mkdtempSync(join(tmpdir(), "gpumem-lazy-agents-")); // mkdtemp: private, and empty
  const loaded = modulesLoaded(["--json", "--once"], { GPUMEM_TUI_DIR: agents });
  expect(loaded).toContain("src/collect/machine.ts"); // it ran: the machine and its document
  expect(loaded).toContain("src/system/document.ts");
  const heavy = loaded.filter((m) => /^node_modules\/(zod|ink|react|react-reconciler|yoga-layout)$|^src\/(tui|profiler|snapshot\/(?!input-file))|^src\/collect\/live\.ts$|^src\/system\/(zod|schema)\.ts$/.test(m));
  expect(heavy).toEqual([]);
  rmSync(agents, { recursive: true });
});
