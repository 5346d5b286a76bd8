// The model's queries only for what is on screen: the screens' session (liveModels as the monitor
// and `run` make it) leaves the peak step's live groups, live memory by line and the forecast out
// of its document, which no screen reads from there (the Process screen makes the forecast itself
// while it is shown), and keeps every figure the screens draw from it; the headless session
// (`--json`, `run --json`, serve) keeps them. A training run recorded on an H100
// (normal.ring), and a leak recorded with stacks on the doubles (test/support/lines-run.ts), as a
// live process's ring.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Machine } from "../../src/collect/machine";
import { Session } from "../../src/collect/session";
import { liveModels } from "../../src/commands/live-models";
import { cleanLines, recordLines } from "../support/lines-run";
import { plantAgent } from "../support/planted-agent";
import { docForecast } from "../../src/tui/screens/process";

const sleeper = Bun.spawn(["sleep", "60"]);
afterAll(() => {
  sleeper.kill();
  cleanLines();
});

function sessionOf(screens: boolean, name = "normal") {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-screens-profile-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  plantAgent(dir, sleeper.pid, {}, name);
  const session = new Session(new Machine({ agentDir: dir }), liveModels(screens ? { keepTrace: true, screens: true } : { keepTrace: false }));
  const doc = session.tick();
  session.close();
  return { doc, session, row: doc.processes.find((p) => p.agent_pid === sleeper.pid)! };
}

function profileOf(screens: boolean, name = "normal") {
  return sessionOf(screens, name).row.pytorch!.profile!;
}

test("the screens' document leaves the peak step's live groups out and keeps what the screens draw", () => {
  const headless = profileOf(false);
  const screens = profileOf(true);
  expect(headless.peak_step!.alive_at_peak!.groups.length).toBeGreaterThan(0);
  expect(screens.peak_step!.alive_at_peak).toBeNull();
  const { peak_step: a, ...restHeadless } = headless;
  const { peak_step: b, ...restScreens } = screens;
  expect(restScreens).toEqual(restHeadless);
  expect({ ...b, alive_at_peak: null }).toEqual({ ...a!, alive_at_peak: null });
});

test("the screens' document leaves the forecast out; the Process screen makes the headless document's", () => {
  const headless = sessionOf(false);
  const screens = sessionOf(true);
  expect(headless.row.pytorch!.forecast).not.toBeNull();
  expect(screens.row.pytorch!.forecast).toBeNull();
  const { forecast: _h, ...restHeadless } = headless.row.pytorch!;
  const { forecast: _s, ...restScreens } = screens.row.pytorch!;
  expect({ ...restScreens, profile: null }).toEqual({ ...restHeadless, profile: null });
  expect(docForecast(screens.doc, screens.session.models.byPid.get(sleeper.pid))).toEqual(headless.row.pytorch!.forecast!);
});

test("with stacks, the screens' document leaves live memory by line out too; the headless one lists it", () => {
  const leak = recordLines("leak").replace(/\.ring$/, "");
  const headless = profileOf(false, leak);
  const screens = profileOf(true, leak);
  expect(headless.lines!.top.length).toBeGreaterThan(0);
  expect(screens.lines).toBeNull();
  const { peak_step: a, lines: _h, ...restHeadless } = headless;
  const { peak_step: b, lines: _s, ...restScreens } = screens;
  expect(restScreens).toEqual(restHeadless);
  expect({ ...b, alive_at_peak: null }).toEqual({ ...a!, alive_at_peak: null });
});
