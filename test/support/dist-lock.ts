// dist/ is rebuilt by two test files: bundle.test.ts (`bun run build:bundle`, then its tests run
// the bundle) and package.test.ts (`bun pm pack`, whose prepack runs the same script, `rm -rf dist`
// first). Under `bun run test` (files in parallel workers) one would delete the bundle under the
// other, so each holds this lock from before its own beforeAll to its end. flock(1) on the
// package's folder: no file is made, and the lock goes with its holder however that ends (its
// stdin closes).
import { afterAll, beforeAll } from "bun:test";
import { ROOT } from "../../src/root";

/** Called at a file's top, before its beforeAll: dist/ is this file's alone while it runs. */
export function holdDist(waitS = 240): void {
  let p: ReturnType<typeof spawnLock> | null = null;
  beforeAll(async () => {
    if (!Bun.which("flock")) return; // util-linux's; where it is missing, run the files serially (`bun test`)
    p = spawnLock(waitS);
    const first = await p.stdout.getReader().read();
    if (!new TextDecoder().decode(first.value).startsWith("held")) throw new Error(`dist/ stayed locked by another test file for ${waitS} s: ${await new Response(p.stderr).text()}`);
  }, (waitS + 10) * 1000);
  afterAll(() => {
    p?.stdin.end();
  });
}

function spawnLock(waitS: number) {
  return Bun.spawn(["flock", "-w", String(waitS), ROOT, "/bin/sh", "-c", "echo held; exec cat >/dev/null"], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
}
