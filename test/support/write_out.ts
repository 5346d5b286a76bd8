// Writes `bytes` bytes of numbered lines through the CLI's standard-output writer (src/headless/out.ts),
// after touching process.stderr as `view` does (which makes a pipe shared by 2>&1 non-blocking);
// writes whether all of it went out to RESULT_FILE. Usage: bun write_out.ts BYTES RESULT_FILE
import { writeFileSync } from "node:fs";
import { writeOut } from "../../src/headless/out";

/** The text for `bytes`: numbered 80-byte lines, so a repeated or lost stretch shows. */
export function numberedLines(bytes: number): string {
  return Array.from({ length: Math.ceil(bytes / 80) }, (_, i) => `${String(i).padStart(10, "0")} ${"y".repeat(68)}\n`).join("");
}

if (import.meta.main) {
  const [bytes, result] = process.argv.slice(2);
  void process.stderr.isTTY;
  const ok = await writeOut(numberedLines(Number(bytes)));
  writeFileSync(result!, String(ok));
}
