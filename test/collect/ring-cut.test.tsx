// A live ring cut short under the monitor (its file truncated while the session reads it): the
// session's tick goes on, that process's ring is no longer read and its notes say so once (the JSON
// document and the Process screen), and every other process is read on. Two recorded rings
// (normal.ring) stand as two live processes' (`sleep`s).
import { afterAll, expect, test } from "bun:test";
import { closeSync, mkdirSync, mkdtempSync, openSync, truncateSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { Session } from "../../src/collect/session";
import { liveModels } from "../../src/commands/live-models";
import { Machine } from "../../src/collect/machine";
import { HEADER_OFFSET } from "../../src/ffi/wire";
import { DocumentSchema } from "../../src/system/schema";
import { ProcessScreen } from "../../src/tui/screens/process";
import { plantAgent } from "../support/planted-agent";

const sleepers = [Bun.spawn(["sleep", "60"]), Bun.spawn(["sleep", "60"])];
afterAll(() => sleepers.forEach((s) => s.kill()));

const CUT = "the ring was cut short under the monitor: reading stopped";
/** normal.ring's records, every one written (its header's write index). */
const RECORDS = 10296;

/** `pid`'s agent in `dir`: normal.ring as its ring (made its own), `written` of its records
 *  written so far, and its manifest. */
function agent(dir: string, pid: number, written: number): string {
  const ring = plantAgent(dir, pid);
  setWritten(ring, written);
  return ring;
}

/** What a writer does: records up to `n` are now written (the one lane's write index). */
function setWritten(ring: string, n: number): void {
  const fd = openSync(ring, "r+");
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  writeSync(fd, b, 0, 8, HEADER_OFFSET.write_index);
  closeSync(fd);
}

test("a ring cut short while the session reads it: said once in that process's notes, the other process read on", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-ring-cut-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  const [a, b] = sleepers.map((s) => s.pid) as [number, number];
  const ringA = agent(dir, a, RECORDS);
  const ringB = agent(dir, b, 5000);
  const session = new Session(new Machine({ agentDir: dir }), liveModels({ keepTrace: false }));
  const row = (doc: ReturnType<Session["tick"]>, pid: number) => doc.processes.find((p) => p.agent_pid === pid || p.pid === pid)!;
  const read = (pid: number) => session.machine.lastAgents.find((x) => x.pid === pid)!.ring!.next();

  let doc = session.tick();
  expect([read(a), read(b)]).toEqual([RECORDS, 5000]);
  expect(row(doc, a).pytorch!.notes).toEqual({});

  // A's file is cut short under the mapping (its owner truncating it); B's writer writes on.
  truncateSync(ringA, 0);
  setWritten(ringB, RECORDS);
  doc = session.tick();
  expect(row(doc, a).pytorch!.notes).toEqual({ ring: CUT });
  expect(read(b)).toBe(RECORDS);
  expect(row(doc, b).pytorch!.notes).toEqual({});
  expect(row(doc, b).pytorch!.profile).not.toBeNull();

  // Said once: later ticks leave the note as it is, and nothing more is read of A's ring.
  for (let i = 0; i < 3; i++) doc = session.tick();
  expect(row(doc, a).pytorch!.notes).toEqual({ ring: CUT });
  expect(DocumentSchema.parse(JSON.parse(JSON.stringify(doc))).processes.find((p) => p.agent_pid === a || p.pid === a)!.pytorch!.notes).toEqual({ ring: CUT });
  const ui = render(<ProcessScreen pm={session.models.byPid.get(a)!} width={160} height={50} ascii={false} />);
  expect(ui.lastFrame()!.split("\n").filter((l) => l.startsWith("ring:"))).toEqual([`ring: ${CUT}`]);
  ui.unmount();
  session.close();
});
