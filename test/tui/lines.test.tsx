// The Lines screen: a real agent control server (Python, the agent's own ControlServer) answering
// the `lines` verb with a real line profile, fetched and checked by the monitor, then rendered.
import { afterAll, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { join } from "node:path";
import { fetchLines, LinesReplySchema } from "../../src/collect/lines";
import { LinesScreen } from "../../src/tui/screens/lines";
import { createModel } from "../../src/profiler";

const server = Bun.spawn(["python3", join(import.meta.dir, "..", "agent", "lines_server.py")], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.split("\n")[0]!.trim();
}
const socket = await firstLine(server.stdout);
afterAll(() => server.kill());

test("the monitor asks an agent for its line profile and shows the heaviest lines first, with their code", async () => {
  expect(socket).toMatch(/s\.sock$/);
  const got = await fetchLines(socket);
  expect("functions" in got).toBe(true);
  if (!("functions" in got)) return;
  const f = got.functions[0]!;
  expect(f.function).toContain("step");
  expect([f.calls, f.profiled_calls]).toEqual([2, 2]);
  const byCode = (needle: string) => f.lines.find((l) => l.code.includes(needle))!;
  expect(byCode("eight MiB").alloc_bytes).toBe(16 * 1024 * 1024);
  expect(byCode("one MiB each").alloc_bytes).toBe(4 * 1024 * 1024);
  expect(byCode("one MiB each").hits).toBe(4);
  expect(byCode("give the eight back").freed_bytes).toBe(16 * 1024 * 1024);
  const pm = { pid: 77, model: createModel(), source: "live" as const, socket, title: "x", ended: false };
  const ui = render(<LinesScreen pm={pm} state={{ ...got, at_ms: Date.now() }} width={100} height={20} />);
  const frame = ui.lastFrame()!;
  const rows = frame.split("\n").filter((l) => /^\s+\d+ /.test(l));
  // Peak active 10 MiB (8 + 2 × 1) is reached on the loop's line, which also allocated the most.
  expect(rows[0]).toContain('t.push("alloc", MiB)');
  expect(rows[0]).toMatch(/^\s+\d+\s+10\.00 MiB\s+0 B\s+4\.00 MiB\s+0 B\s+4 /);
  expect(rows.some((r) => r.includes("16.00 MiB") && r.includes("big = t.push"))).toBe(true);
  expect(frame).toContain("2 calls, 2 profiled");
  ui.unmount();
});

test("a malformed line profile is refused in words; a replay says where line profiles come from", async () => {
  const bad = LinesReplySchema.safeParse({ functions: [{ function: "f", lines: [{ line: -1 }] }] });
  expect(bad.success).toBe(false);
  const pm = { pid: 1, model: createModel(), source: "replay" as const, socket: null, title: "r", ended: true };
  const ui = render(<LinesScreen pm={pm} state={undefined} width={100} height={10} />);
  expect(ui.lastFrame()).toContain("@gpumem_agent.profile");
  ui.unmount();
});
