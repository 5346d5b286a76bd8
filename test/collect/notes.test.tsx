// An agent's notes (what it runs without, and why: a feature that failed and turned itself off)
// reach the JSON document's process and the Process screen, read again when the agent rewrites
// its manifest. A recorded ring (normal.ring) stands as a live process's (a `sleep`).
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { Session } from "../../src/collect/session";
import { liveModels } from "../../src/commands/live-models";
import { Machine } from "../../src/collect/machine";
import { DocumentSchema } from "../../src/system/schema";
import { ProcessScreen } from "../../src/tui/screens/process";
import { plantAgent, writePlantedManifest } from "../support/planted-agent";

const sleeper = Bun.spawn(["sleep", "60"]);
afterAll(() => sleeper.kill());

const NAMES_OFF = "off: RuntimeError: Attempted to access the data pointer on an invalid python storage (at step 1)";

test("a note in the manifest: in the process's pytorch block of the JSON and on the Process screen, as 'feature: sentence'", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-notes-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  const pid = sleeper.pid;
  const ring = plantAgent(dir, pid, { notes: {} });

  const session = new Session(new Machine({ agentDir: dir }), liveModels({ keepTrace: false }));
  const row = () => session.tick().processes.find((p) => p.agent_pid === pid || p.pid === pid)!;
  expect(row().pytorch!.notes).toEqual({});
  const pm = session.models.byPid.get(pid)!;
  let ui = render(<ProcessScreen pm={pm} width={160} height={50} ascii={false} />);
  expect(ui.lastFrame()!).not.toContain("names:");
  ui.unmount();

  // The agent turns names off and rewrites its manifest: the next tick says so.
  const manifest = writePlantedManifest(dir, pid, ring, { notes: { names: NAMES_OFF } });
  utimesSync(manifest, new Date(), new Date(Date.now() + 5000)); // a later mtime however coarse the clock
  const doc = session.tick();
  const p = doc.processes.find((x) => x.agent_pid === pid || x.pid === pid)!;
  expect(p.pytorch!.notes).toEqual({ names: NAMES_OFF });
  expect(DocumentSchema.parse(JSON.parse(JSON.stringify(doc))).processes.find((x) => x.pytorch)!.pytorch!.notes).toEqual({ names: NAMES_OFF });
  ui = render(<ProcessScreen pm={pm} width={160} height={50} ascii={false} />);
  // One line under the headline and the reserved but unallocated line, cut at the terminal's width
  // (the test terminal has 100 columns).
  expect(ui.lastFrame()!.split("\n")[3]).toStartWith("reserved but unallocated");
  expect(ui.lastFrame()!.split("\n")[4]).toStartWith(`names: ${NAMES_OFF}`.slice(0, 90));
  ui.unmount();
});
