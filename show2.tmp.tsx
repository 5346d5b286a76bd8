import { render } from "ink-testing-library";
import { createModel } from "./src/profiler";
import { replay } from "./src/profiler/replay";
import { openRingRecording } from "./src/collect/recording";
import { App } from "./src/tui/app";
import { Controller } from "./src/tui/controller";
const [name, cols, rows, keys] = process.argv.slice(2);
const rec = openRingRecording(name!);
const model = createModel().keepTrace();
for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) {}
const ctl = new Controller(null, 1000);
ctl.replay = { pid: 4242, model, source: "replay", socket: null, title: name!, ended: true };
const ui = render(<App ctl={ctl} ascii={false} size={{ columns: Number(cols), rows: Number(rows) }} />);
const tick = () => new Promise((r) => setTimeout(r, 50));
await tick();
for (const k of (keys ?? "").split(",")) { ui.stdin.write(k === "ENTER" ? "\r" : k === "ESC" ? "\x1b" : k); await tick(); }
console.log(ui.lastFrame());
ui.unmount(); process.exit(0);
