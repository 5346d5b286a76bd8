// The Lines screen, from the monitor's own model: the agent's real line profiler follows a function
// on a real ring file (test/agent/lines_server.py); the monitor reads that ring as it reads any,
// and its rows must say what the agent's own table (its `lines` verb, its table at exit) says.
import { afterAll, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { join } from "node:path";
import { newEventBatch } from "../../src/ffi/events";
import { openRing } from "../../src/ffi/ring";
import { fetchLines, LinesReplySchema } from "../../src/collect/lines";
import { LinesScreen } from "../../src/tui/screens/lines";
import { createModel } from "../../src/profiler";
import { formatBytes } from "../../src/tui/format";

const server = Bun.spawn(["python3", join(import.meta.dir, "..", "agent", "lines_server.py")], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
async function firstLines(stream: ReadableStream<Uint8Array>, n: number): Promise<string[]> {
  const reader = stream.getReader();
  let text = "";
  while (text.split("\n").length <= n) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.split("\n").slice(0, n).map((l) => l.trim());
}
const [socket, made] = await firstLines(server.stdout, 2);
const { ring, lines } = JSON.parse(made!) as { ring: string; lines: Record<string, string> };
afterAll(() => server.kill());

/** The monitor's model of the ring the profiled calls wrote, its lines named from the manifest's table. */
function monitorModel() {
  const m = createModel();
  m.setLines(lines);
  const r = openRing(ring, { fold: true });
  const b = newEventBatch(1024);
  for (let n = r.read(b); n.count > 0; n = r.read(b)) m.ingest(b, n.lost);
  return m;
}

test("the Lines screen shows what the records' lines did, as the agent's own profile says, heaviest first", async () => {
  expect(socket).toMatch(/s\.sock$/);
  const got = await fetchLines(socket!);
  if (!("functions" in got)) throw new Error(got.error);
  const agent = got.functions[0]!.lines.filter((l) => l.n_alloc + l.n_free > 0);
  const m = monitorModel();
  const rows = m.lines.rows(m.lineNames);
  // Each line that allocated or freed: the same bytes and counts in the monitor's model as in the agent's table.
  const mine = rows.map((r) => ({ line: Number(r.location!.split(":").pop()), code: r.code, alloc_bytes: r.alloc_bytes, freed_bytes: r.freed_bytes, n_alloc: r.n_alloc, n_free: r.n_free }));
  const theirs = agent.map((l) => ({ line: l.line, code: l.code, alloc_bytes: l.alloc_bytes, freed_bytes: l.freed_bytes, n_alloc: l.n_alloc, n_free: l.n_free }));
  expect(mine.sort((a, b) => a.line - b.line)).toEqual(theirs.sort((a, b) => a.line - b.line));
  // The device's highest level was reached on the loop's line (the agent's fake allocator never
  // completes a free, so the level here is the device's, not the agent's per-call one).
  expect(rows[0]!.code).toBe('t.push("alloc", MiB)  # one MiB each time round');
  expect(rows[0]!.peak_active_bytes).toBe(m.devices[0]!.peakActive);
  const pm = { pid: 77, model: m, source: "replay" as const, socket: null, title: "x", ended: true };
  const frame = render(<LinesScreen pm={pm} width={120} height={20} />).lastFrame()!;
  const shown = frame.split("\n").filter((l) => /\.py:\d+ /.test(l));
  expect(shown.length).toBe(rows.length);
  expect(shown[0]).toMatch(new RegExp(`^lines_server\\.py:\\d+\\s+${formatBytes(m.devices[0]!.peakActive).replace(".", "\\.")}\\s+0 B\\s+4\\.00 MiB\\s+0 B\\s+4\\s+t\\.push\\("alloc", MiB\\)`));
  expect(shown.some((r) => r.includes("16.00 MiB") && r.includes("big = t.push"))).toBe(true);
});

test("a process whose records carry no line says where line profiles come from; a malformed `lines` reply is refused", () => {
  const bad = LinesReplySchema.safeParse({ functions: [{ function: "f", lines: [{ line: -1 }] }] });
  expect(bad.success).toBe(false);
  const pm = { pid: 1, model: createModel(), source: "replay" as const, socket: null, title: "r", ended: true };
  const ui = render(<LinesScreen pm={pm} width={100} height={10} />);
  expect(ui.lastFrame()).toContain("@gpumem_agent.profile");
  ui.unmount();
});
