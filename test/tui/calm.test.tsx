// Calm screens: a tick whose state draws what the last frame drew is not handed to React, Yoga and
// Ink (src/tui/drawn.ts); one that changes a figure on screen is drawn, and a key or a message
// always is. Counted as the App's commits (React's Profiler), on a document recorded on an H100.
import { describe, expect, test } from "bun:test";
import chalk from "chalk";
import { Box, Text } from "ink";
import { render } from "ink-testing-library";
import { Profiler } from "react";
import type { Document } from "../../src/system/schema";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import recorded from "../fixtures/h100-training.json";

const SIZE = { columns: 160, rows: 50 };
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

function mounted(initialScreen?: "overview" | "process") {
  const ctl = new Controller(null, 1000);
  const base = recorded as unknown as Document;
  ctl.doc = base;
  let commits = 0;
  const ui = render(
    <Profiler id="app" onRender={() => commits++}>
      <App ctl={ctl} ascii={false} size={SIZE} initialScreen={initialScreen} />
    </Profiler>,
  );
  /** A tick on `doc` (the machine's document as a session would have sampled it). */
  const tick = async (doc: Document) => {
    ctl.doc = doc;
    await ctl.tick();
    await settle();
  };
  return { ctl, base, ui, tick, commits: () => commits, frame: () => plain(ui.lastFrame()!) };
}

describe("calm screens", () => {
  test("the Overview: ticks that change nothing it shows draw nothing; a figure it shows changing draws once", async () => {
    const m = mounted();
    try {
      const d0 = m.base.devices[0]!;
      await m.tick(m.base);
      const drawn = m.commits();
      expect(m.frame()).toContain("123/700 W");
      // Later samples of the same figures, and a power draw that still shows as 123 W.
      for (let i = 1; i <= 5; i++) await m.tick({ ...m.base, time_unix_ms: m.base.time_unix_ms + i * 1000, devices: [{ ...d0, power_draw_milliwatts: 123103 + i * 50 }] });
      expect(m.ctl.ticks).toBe(6);
      expect(m.commits()).toBe(drawn);
      // 5 W more: on screen, so drawn, once.
      await m.tick({ ...m.base, devices: [{ ...d0, power_draw_milliwatts: 128_000 }] });
      expect(m.commits()).toBe(drawn + 1);
      expect(m.frame()).toContain("128/700 W");
      // A message is drawn whatever the tick's state.
      m.ctl.say("hello from the test");
      await settle();
      expect(m.commits()).toBe(drawn + 2);
      expect(m.frame()).toContain("hello from the test");
      // A key is drawn at once, and the next tick of an unchanged state draws nothing more than the
      // frame it had to make again after the key.
      m.ui.stdin.write("7");
      await settle();
      expect(m.frame()).toContain("[7 Help]");
      const afterKey = m.commits();
      await m.tick({ ...m.base, devices: [{ ...d0, power_draw_milliwatts: 128_000 }] });
      await m.tick({ ...m.base, devices: [{ ...d0, power_draw_milliwatts: 128_000 }] });
      expect(m.commits() - afterKey).toBeLessThanOrEqual(1);
    } finally {
      m.ui.unmount();
    }
  });

  test("a GPU chart that moves is drawn at each tick", async () => {
    const m = mounted();
    try {
      const h = { util: [10, 50, 90], memUsed: [1, 2, 3].map((x) => x * 2 ** 30), timesMs: [0, 1000, 2000] };
      m.ctl.history.set(0, h);
      await m.tick(m.base);
      const drawn = m.commits();
      for (let i = 0; i < 3; i++) {
        h.util.push(i % 2 ? 100 : 0), h.memUsed.push(2 ** 30), h.timesMs.push(3000 + i * 1000);
        await m.tick(m.base);
      }
      expect(m.commits()).toBe(drawn + 3);
    } finally {
      m.ui.unmount();
    }
  });

  // A guard on the rows Ink keeps from the frame before (patches/ink@8.0.0.patch): a row is kept only
  // where its words, their column, their style and their clip are the same.
  test("a row kept from the frame before only where nothing of it changed: its style, its column", () => {
    const level = chalk.level;
    chalk.level = 1;
    try {
      const Rows = ({ inverse, indent }: { inverse: boolean; indent: number }) => (
        <Box flexDirection="column">
          <Text>the same words</Text>
          <Text inverse={inverse}>the selected row</Text>
          <Box marginLeft={indent}>
            <Text>moved</Text>
          </Box>
        </Box>
      );
      const ui = render(<Rows inverse={false} indent={0} />);
      const plainFrame = ui.lastFrame()!;
      ui.rerender(<Rows inverse={true} indent={0} />);
      expect(ui.lastFrame()).toContain("\x1b[7mthe selected row");
      ui.rerender(<Rows inverse={true} indent={3} />);
      expect(ui.lastFrame()!.split("\n")[2]).toBe("   moved");
      ui.rerender(<Rows inverse={false} indent={0} />);
      expect(ui.lastFrame()).toBe(plainFrame);
      ui.unmount();
    } finally {
      chalk.level = level;
    }
  });
});
