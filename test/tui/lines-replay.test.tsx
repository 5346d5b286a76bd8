// A replayed recording whose records carry lines shows them on the Lines screen, named as its
// manifest names them, as a live process does: the ring the agent's real line profiler wrote
// (test/agent/lines_server.py) is saved as a recording (ring + manifest beside it) and played back.
import { afterAll, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { startReplay } from "../../src/collect/playback";
import { openRingRecording } from "../../src/collect/recording";
import { LinesScreen } from "../../src/tui/screens/lines";
import { steppedClock } from "../support/clock";

const FIXTURES = join(import.meta.dir, "..", "fixtures");
const server = Bun.spawn(["python3", join(import.meta.dir, "..", "agent", "lines_server.py")], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
const dir = mkdtempSync(join(tmpdir(), "lines-replay-"));
afterAll(() => {
  server.kill();
  rmSync(dir, { recursive: true, force: true });
});

/** The server's second line: the ring it wrote and the names of its lines. */
async function made(): Promise<{ ring: string; lines: Record<string, string> }> {
  const reader = server.stdout.getReader();
  let text = "";
  while (text.split("\n").length <= 2) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return JSON.parse(text.split("\n")[1]!);
}

test("a replayed recording with lines shows them on the Lines screen, named from its manifest", async () => {
  const { ring, lines } = await made();
  expect(Object.keys(lines).length).toBeGreaterThan(2);
  // A recording as the agent saves one: the ring, and its manifest (x.json) naming the lines.
  copyFileSync(ring, join(dir, "x.ring"));
  const manifest = JSON.parse(readFileSync(join(FIXTURES, "hf-gpt2.json"), "utf8"));
  writeFileSync(join(dir, "x.json"), JSON.stringify({ ...manifest, ring: "x.ring", lines }));
  const clock = steppedClock();
  const r = startReplay(openRingRecording(join(dir, "x.ring")), { speed: 1, onUpdate: () => {}, clock });
  try {
    for (let i = 0; i < 200 && !r.pm.ended; i++) await clock.advance(100_000);
    expect(r.pm.ended).toBe(true);
    const frame = render(<LinesScreen pm={r.pm} width={160} height={20} />).lastFrame()!;
    const shown = frame.split("\n").filter((l) => /lines_server\.py:\d+ /.test(l));
    // Every line that allocated or freed, by its place in the file and its code.
    expect(shown.length).toBe(3);
    expect(shown.some((l) => l.includes("16.00 MiB") && l.includes("big = t.push"))).toBe(true);
    expect(shown.some((l) => /lines_server\.py:\d+ .* 4\.00 MiB .* t\.push\("alloc", MiB\)/.test(l))).toBe(true);
  } finally {
    r.stop();
  }
});
