// The finding where the eye is and htop's function keys, in a real terminal (tmux,
// test/support/tmux.ts) at 80×24 and 200×60: a GPT-2 leak recorded on an H100
// (test/fixtures/hf-gpt2-leak.ring.gz) replayed to its end. Its row on the Overview is marked `!`
// and drawn yellow, the header counts the finding, the status line titles it; F1, F3, F4, F6, F9
// and F10 as tmux sends them (its own terminal's sequences, not the outer one's) do what htop's do;
// Esc from Findings opened on Process goes back to Process.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openRecording } from "../../src/collect/recording";
import { createModel, findings } from "../../src/profiler";
import { replay } from "../../src/profiler/replay";
import { recordFields } from "../../src/system/manifest";
import { cannot, q, terminal } from "../support/tmux";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const RING = join(import.meta.dir, "..", "fixtures", "hf-gpt2-leak.ring.gz");
// Each size its own terminal (test/support/tmux.ts names it) and monitor: concurrent.
const inTerminal = (name: string, fn: () => Promise<void>) => (cannot === null ? test.concurrent(name, fn, 60_000) : test.skip(`${name} (${cannot})`, fn));

/** The growth finding's title and the recorded pid, from the recording replayed here. */
let known: ReturnType<typeof expected1> | undefined;
const expected = () => (known ??= expected1()); // once for both sizes
async function expected1() {
  const rec = await openRecording(RING);
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), model }));
  rec.close();
  return { pid: rec.manifest!.pid, title: findings(model).find((f) => f.id === "growth")!.title };
}

/** The pane with its colours (SGR sequences), as test/support/tmux.ts's server holds it. */
function colouredPane(session: string): string {
  const r = Bun.spawnSync([Bun.which("tmux")!, "-L", `gpumem-t-${process.pid}`, "-f", "/dev/null", "capture-pane", "-p", "-e", "-t", `${session}-${process.pid}`], { env: process.env, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`tmux capture-pane: ${r.stderr.toString()}`);
  return r.stdout.toString();
}

describe("the finding and the function keys, in a real terminal", () => {
  for (const [cols, rows] of [
    [80, 24],
    [200, 60],
  ] as const) {
    inTerminal(`${cols}×${rows}: the leak's row marked, F1 F3 F4 F6 F9 F10, Esc back to Process`, async () => {
      const want = await expected();
      const name = `habits-${cols}`;
      const t = terminal(name, `${q(process.execPath)} ${q(CLI)} replay ${q(RING)} --speed 50`, cols, rows);
      const fits = (text: string) => {
        for (const l of text.split("\n")) expect({ l, fits: [...l].length <= cols }).toEqual({ l, fits: true });
      };
      try {
        await t.until(/\[replay finished\]/, 30_000);
        t.keys("1");
        const overview = await t.until(/! warning: memory held/);
        fits(overview);
        const lines = overview.split("\n");
        expect(lines[0]).toMatch(/1 finding\s*$/);
        const row = lines.find((l) => l.startsWith(`${want.pid} `))!;
        expect(row).toMatch(/ ! /);
        expect(overview).toContain(`! warning: ${want.title}`.slice(0, cols - 2));
        // The row and the status line in yellow (SGR 33), the row inverse as the selection.
        const coloured = colouredPane(name).split("\n");
        expect(coloured.find((l) => l.replace(/\x1b\[[0-9;]*m/g, "").startsWith(`${want.pid} `))).toMatch(/\x1b\[[0-9;]*33[;m]/);
        expect(coloured[0]).toMatch(/\x1b\[[0-9;]*33[;m].*1 finding/);
        // F1: Help, then back.
        t.keys("F1");
        const help = await t.until("gpumem-tui keys");
        expect(help).toMatch(/↑ ↓  j +move the selection/);
        expect(help).not.toMatch(/j k +move the selection/);
        t.keys("F1");
        await t.until(/! warning: memory held/);
        // F4: the filter; Esc clears it (the Overview stays).
        t.keys("F4", "h", "f", "_");
        await t.until("filter: hf_▏");
        t.keys("Enter");
        // Kept: the prompt gone, the row still there.
        for (let i = 0; i < 50 && t.pane().includes("filter: hf_▏"); i++) await Bun.sleep(100);
        expect(t.pane()).toMatch(new RegExp(`^${want.pid} `, "m"));
        t.keys("Escape");
        await t.until("filter cleared");
        expect(t.pane().split("\n")[0]).toContain("[1 Overview]");
        // F3: a search that finds the row; F6: the next sort.
        t.keys("F3", "6", "0", "1");
        await t.until("search: 601▏  (F3 next");
        t.keys("Enter", "F6");
        await t.until(/ALLOCATED▼/);
        // F9: what k asks, here a recording's answer.
        t.keys("F9");
        await t.until(`k: pid ${want.pid} is a recording: there is no process to stop`);
        // Enter, Enter: Process, then Findings; Esc back to Process, Esc to the Overview.
        t.keys("Enter");
        await t.until(/\[2 Process\]/);
        t.keys("Enter");
        await t.until(/\[6 Findings\]/);
        t.keys("Escape");
        await t.until(/\[2 Process\]/);
        t.keys("Escape");
        await t.until(/\[1 Overview\]/);
        // The function-key bar at the bottom once nothing is said.
        if (cols >= 200) await t.until(/^! warning: .* F1Help +F3Search F4Filter F6SortBy F9Kill +F10Quit *$/m, 10_000);
        t.keys("F10");
        await t.until("exit status 0");
      } finally {
        t.close();
      }
    });
  }
});
