// `gpumem-tui run --json` on a program, as the end-of-run and stack tests drive it: a private agent
// directory, the run's status and output, and its final document parsed.
import { mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DocumentSchema, type Document } from "../../src/system/schema";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");

/** A private (0700) agent directory of its own. */
export function agentDir(): string {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-end-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}

/** `gpumem-tui run --json` on `argv`: its status, the child's output, and the final document. */
export function runJson(dir: string, argv: string[], interval: number, env: Record<string, string> = {}) {
  const out = join(dir, "..", "run.ndjson");
  const p = Bun.spawnSync(["bun", CLI, "run", "--json", "--interval", String(interval), "--output", out, "--", ...argv], {
    env: { ...process.env, GPUMEM_TUI_DIR: dir, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const lines = readFileSync(out, "utf8").trim().split("\n");
  const last = DocumentSchema.parse(JSON.parse(lines.at(-1)!)) as Document;
  const pid = Number(/^pid (\d+)/m.exec(p.stdout.toString())?.[1]);
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString(), last, pid, lines: lines.length };
}
