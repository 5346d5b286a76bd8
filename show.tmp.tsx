import { render } from "ink-testing-library";
import { join } from "node:path";
import { createModel } from "/work/wt-screens-b/src/profiler";
import { replay } from "/work/wt-screens-b/src/profiler/replay";
import { openRingRecording } from "/work/wt-screens-b/src/collect/recording";
import { App } from "/work/wt-screens-b/src/tui/app";
import { Controller } from "/work/wt-screens-b/src/tui/controller";
const [name, cols, rows, screen] = process.argv.slice(2);
const rec = openRingRecording(name!);
const model = createModel().keepTrace();
for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) {}
const ctl = new Controller(null, 1000);
ctl.replay = { pid: 4242, model, source: "replay", socket: null, title: name!, ended: true };
const ui = render(<App ctl={ctl} ascii={false} size={{ columns: Number(cols), rows: Number(rows) }} initialScreen={Number(screen ?? 1)} />);
await new Promise((r) => setTimeout(r, 50));
console.log(ui.lastFrame());
ui.unmount(); process.exit(0);
