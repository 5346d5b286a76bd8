// `gpumem-tui attach PID`: the agent started inside a CPython process that runs already (a launcher's
// pid: each of its ranks), then the monitor on it. One or two lines say what happened.
import { attachProcess, type AttachResult } from "../attach/attach";
import { cmdline, descendants, isLauncher } from "../attach/ranks";
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  const pid = Number(opts.rest[0]);
  const a = opts.attach!;
  const say = (line: string) => process.stderr.write(`gpumem-tui: ${line}\n`);
  const { isatty } = require("node:tty") as typeof import("node:tty");
  // The screens open after the attach where asked and where there is a terminal to draw them on:
  // this monitor then owns the attach, and the agent detaches when it exits. Without them
  // (`--no-monitor`, no terminal) the agent stays until `detach` or the program's exit.
  const screens = a.monitor && isatty(0) && isatty(1);
  const base = { timeoutS: a.timeoutS, wait: a.wait, say, owned: screens };
  let results: AttachResult[];
  if (isLauncher(cmdline(pid))) {
    // The ranks are Python processes below the launcher: those the helper reaches, one at a time.
    const ranks = descendants(pid).filter((p) => cmdline(p).some((w) => /python/.test(w.split("/").pop() ?? "")));
    if (ranks.length === 0) {
      say(`attach ${pid}: a launcher with no Python ranks (yet); try again once they run`);
      return 1;
    }
    say(`process ${pid} is a launcher: attaching its ${ranks.length} ranks (${ranks.join(", ")})`);
    results = [];
    for (const r of ranks) {
      const res = await attachProcess(r, base);
      say(res.line);
      results.push(res);
    }
  } else {
    const res = await attachProcess(pid, base);
    say(res.line);
    results = [res];
  }
  const ok = results.every((r) => r.ok);
  if (!ok || !screens) return ok ? 0 : 1; // attached; no screens asked for, or no terminal to draw them on
  // The monitor shows every agent of this user: the attached process among them.
  const { command: monitor } = await import("./monitor");
  return await monitor({ ...opts, command: "monitor", rest: [] });
}
