// Many processes, one looked at: where more than FOLLOW_ALL_UP_TO agents run, the screens read the
// ring of the process they show in detail only; the others keep their ring headers' figures, have no
// profile and no findings, say so in their notes, and the frame's corner counts them. Opening another
// process reads its ring from the next tick on. Three recorded trainings (normal.ring) planted as
// the rings of live `sleep` processes; the headless session reads all three.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { RING_UNREAD } from "../../src/collect/live";
import { Machine } from "../../src/collect/machine";
import { Session } from "../../src/collect/session";
import { liveModels } from "../../src/commands/live-models";
import { App } from "../../src/tui/app";
import { Controller, FOLLOW_ALL_UP_TO } from "../../src/tui/controller";
import { plantAgent } from "../support/planted-agent";

const sleepers = Array.from({ length: FOLLOW_ALL_UP_TO + 1 }, () => Bun.spawn(["sleep", "60"]));
afterAll(() => sleepers.forEach((s) => s.kill()));
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

function agents(): string {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-follow-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  for (const s of sleepers) plantAgent(dir, s.pid, {}, "normal");
  return dir;
}

const rowOf = (ctl: Controller, pid: number) => ctl.state.doc!.processes.find((p) => p.agent_pid === pid)!;

test("the screens read the shown process's ring only where many run; the others say they show their headers' figures", async () => {
  const session = new Session(new Machine({ agentDir: agents() }), liveModels({ keepTrace: true, screens: true }));
  const ctl = new Controller(session, 1000);
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 160, rows: 50 }} />);
  try {
    // The first tick finds the agents (every ring read: none was counted yet), the next follows.
    await ctl.tick();
    await settle();
    await ctl.tick();
    await settle();
    const shown = ctl.focus!;
    expect(sleepers.map((s) => s.pid)).toContain(shown);
    const others = sleepers.map((s) => s.pid).filter((p) => p !== shown);
    expect(rowOf(ctl, shown).pytorch!.profile).not.toBeNull();
    for (const pid of others) {
      const row = rowOf(ctl, pid).pytorch!;
      expect(row.profile).toBeNull();
      expect(row.notes.ring).toContain(RING_UNREAD);
      // The header's figures stand: the recorded training's totals.
      expect(row.allocated_bytes).toBeGreaterThan(0);
      expect(ctl.state.findings.get(pid)).toEqual([]);
    }
    expect(ui.lastFrame()!.split("\n")[0]).toContain(`${others.length} on headers`);
    // Another process opened (down to a row that is not the shown one, Enter): its ring is read
    // from the next tick, and the one shown before is left unread.
    for (let i = 0; i < sleepers.length && ctl.focus === shown; i++) {
      ui.stdin.write("1");
      await settle();
      for (let k = 0; k <= i; k++) ui.stdin.write("\x1b[B");
      await settle();
      ui.stdin.write("\r");
      await settle();
    }
    const pick = ctl.focus!;
    expect(others).toContain(pick);
    expect(ui.lastFrame()).toContain("[2 Process]");
    await ctl.tick();
    await settle();
    expect(rowOf(ctl, pick).pytorch!.profile).not.toBeNull();
    expect(rowOf(ctl, shown).pytorch!.profile).toBeNull();
  } finally {
    ui.unmount();
    session.close();
  }
});

test("the headless session reads every ring", () => {
  const session = new Session(new Machine({ agentDir: agents() }), liveModels({ keepTrace: false }));
  session.tick();
  const doc = session.tick();
  for (const s of sleepers) expect(doc.processes.find((p) => p.agent_pid === s.pid)!.pytorch!.profile).not.toBeNull();
  session.close();
});
