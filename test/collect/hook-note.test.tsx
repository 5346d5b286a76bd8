// Why the allocator hook is not used (the manifest's hook_error: no compiler, a hook cache others
// could write, polling asked for) is one of the process's notes, `hook`, in the JSON document and on
// the Process screen, like every other thing the agent runs without. The manifest keeps hook_error.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { Session } from "../../src/collect/session";
import { liveModels } from "../../src/commands/live-models";
import { Machine } from "../../src/collect/machine";
import { processNotes } from "../../src/system/document";
import { DocumentSchema } from "../../src/system/schema";
import { ProcessScreen } from "../../src/tui/screens/process";
import { plantAgent } from "../support/planted-agent";

const sleeper = Bun.spawn(["sleep", "60"]);
afterAll(() => sleeper.kill());

const CACHE = "the hook cache /home/u/.cache/gpumem-tui is writable by other users (mode 775): not loaded; remove it: rm -r /home/u/.cache/gpumem-tui";

test("hook_error: a `hook` note in the process's pytorch block of the JSON and on the Process screen", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-hook-note-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  const pid = sleeper.pid;
  plantAgent(dir, pid, { hook_mode: "polling", hook_error: CACHE, notes: { names: "off: RuntimeError: x (at step 3)" } });

  const session = new Session(new Machine({ agentDir: dir }), liveModels({ keepTrace: false }));
  const doc = session.tick();
  const want = { hook: CACHE, names: "off: RuntimeError: x (at step 3)" };
  const p = doc.processes.find((x) => x.agent_pid === pid || x.pid === pid)!;
  expect(p.pytorch!.notes).toEqual(want);
  expect(DocumentSchema.parse(JSON.parse(JSON.stringify(doc))).processes.find((x) => x.pytorch)!.pytorch!.notes).toEqual(want);
  // At the test terminal's width (100 columns): one line each, cut after a whole word.
  const ui = render(<ProcessScreen pm={session.models.byPid.get(pid)!} width={100} height={50} ascii={false} />);
  const lines = ui.lastFrame()!.split("\n");
  expect(lines.filter((l) => l.startsWith("hook: "))).toEqual(["hook: the hook cache /home/u/.cache/gpumem-tui is writable by other users (mode 775): not loaded;…"]);
  expect(lines.some((l) => l.startsWith("names: off: RuntimeError: x"))).toBe(true);
  ui.unmount();
  session.close();
});

test("said once: not where the agent's notes say it already, under `hook` or another feature", () => {
  expect(processNotes({ notes: {}, hook_error: null })).toEqual({});
  expect(processNotes({ notes: {}, hook_error: "no compiler" })).toEqual({ hook: "no compiler" });
  expect(processNotes({ notes: { hook: "the agent's own words" }, hook_error: "no compiler" })).toEqual({ hook: "the agent's own words" });
  // No record space: the ring's note is why the hook is not used (agent.py), already said.
  expect(processNotes({ notes: { ring: "totals only: 1 MiB free" }, hook_error: "totals only: 1 MiB free" })).toEqual({ ring: "totals only: 1 MiB free" });
});
