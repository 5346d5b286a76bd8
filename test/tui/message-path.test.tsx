// A message that names a path (the run's log, `d`'s snapshot) on the status line: the sentence on a
// line, the path in full on lines of its own, wrapped where it is wider than the terminal; the
// screen above gives up those lines, so the frame stays a line shorter than the terminal (issue 39).
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { replayed } from "../support/replayed";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { settle } from "../support/settle";

const tick = () => settle(50);
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

describe("a path on the status line", () => {
  const log = "/tmp/gpumem-tui-run-2200-fb36c1d2e3f4a5b6c7d8e9f0/output-of-train.py-with-a-long-name.log";
  for (const [columns, rows] of [
    [60, 15],
    [80, 24],
    [200, 60],
  ] as const) {
    test(`${columns}×${rows}: the log's path whole, on lines of its own where the line cannot hold it`, async () => {
      const ctl = new Controller(null, 1000);
      ctl.replay = await replayed("normal");
      const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} initialScreen="process" />);
      await tick();
      ctl.say(`pid 2200 exited with status 1 (q quits); its output is in\n${log}`);
      await tick();
      const lines = plain(ui.lastFrame()!).split("\n");
      expect(lines.length).toBeLessThan(rows);
      for (const l of lines) expect(Bun.stringWidth(l)).toBeLessThanOrEqual(columns);
      const at = lines.findIndex((l) => l.startsWith("/tmp/"));
      if (columns >= 200) {
        // Room for both on one line: the sentence and the path beside it.
        expect(lines.at(-1)).toContain(`its output is in  ${log}`);
      } else {
        expect(at).toBeGreaterThan(0);
        expect(lines[at - 1]).toContain("pid 2200 exited with status 1");
        expect(lines.slice(at).map((l) => l.trimEnd()).join("")).toBe(log);
        // The tab line still leads: the screen gave up its lines, not the frame's head.
        expect(lines[0]).toStartWith("gpumem-tui");
      }
      ui.unmount();
    });
  }
});
