// Standard output of any size survives `2>&1 |`: with stdout and stderr on one pipe, read slowly,
// every byte comes out once (Bun.write on that non-blocking pipe wrote the first 64 KiB twice).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { numberedLines } from "../support/write_out";

const SCRIPT = join(import.meta.dir, "..", "support", "write_out.ts");
const BUN = process.execPath;
const dir = mkdtempSync(join(tmpdir(), "gpumem-out-"));
const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

describe("writeOut", () => {
  // 70 kB and 200 kB came out 64 KiB too long on every try before; 1.2 MB too is checked.
  for (const bytes of [70_000, 200_000, 1_200_000]) {
    test(`${bytes} bytes through 2>&1 into a pipe read slowly: byte for byte`, () => {
      const got = join(dir, `got-${bytes}`);
      const result = join(dir, `ok-${bytes}`);
      const r = Bun.spawnSync(["/bin/sh", "-c", `${q(BUN)} ${q(SCRIPT)} ${bytes} ${q(result)} 2>&1 | (sleep 0.3; cat) > ${q(got)}`]);
      expect(r.exitCode).toBe(0);
      const text = readFileSync(got, "utf8");
      const want = numberedLines(bytes);
      expect(text.length).toBe(want.length);
      expect(text === want).toBe(true);
      expect(readFileSync(result, "utf8")).toBe("true");
    });
  }

  test("a reader that goes away (| head -c 100): false, and a quiet end", () => {
    const result = join(dir, "ok-head");
    const r = Bun.spawnSync(["/bin/sh", "-c", `${q(BUN)} ${q(SCRIPT)} 3000000 ${q(result)} 2>&1 | head -c 100 > /dev/null`]);
    expect(r.exitCode).toBe(0);
    expect(readFileSync(result, "utf8")).toBe("false"); // written after writeOut returned: no throw
  });
});
