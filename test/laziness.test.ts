// Start-up laziness lives in one place, the commands (src/commands/*, and src/cli.ts before them):
// anywhere else an import is static, so that a file's imports show its real dependencies.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../src/root";

test("no require() or await import() outside src/commands and src/cli.ts", () => {
  const found: string[] = [];
  for (const f of new Bun.Glob("src/**/*.{ts,tsx}").scanSync(ROOT)) {
    if (f.startsWith("src/commands/") || f === "src/cli.ts") continue;
    readFileSync(join(ROOT, f), "utf8")
      .split("\n")
      .forEach((line, i) => {
        if (/\brequire\(|await import\(/.test(line)) found.push(`${f}:${i + 1}: ${line.trim()}`);
      });
  }
  expect(found).toEqual([]);
});
