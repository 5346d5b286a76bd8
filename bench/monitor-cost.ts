#!/usr/bin/env bun
// Several monitors' own cost over the same seconds, side by side: each labelled command in a tmux
// pane of its own (200×60; the command exec'd, so the pane's process is the monitor), a key pressed
// where given (the screen it shows), or a process already running named by its pid (`run --json`);
// then every one's share of a core and largest resident set, from /proc, over the same SECONDS.
//   bun bench/monitor-cost.ts OUT.json SECONDS WARMUP_S 'LABEL[@KEY]=COMMAND' 'LABEL=pid:PID' ...
// OUT.json gets the figures and each pane as it was at the end (what the monitor was showing);
// with COST_WINDOW=S, each monitor's threads in every S seconds too (`windows`).
import { writeFileSync } from "node:fs";
import { procUsage } from "./support/proc-usage";

const tmux = Bun.which("tmux");
const sh = (...a: string[]) => Bun.spawnSync([tmux!, ...a], { stdout: "pipe" }).stdout.toString();

interface Subject {
  label: string;
  key: string | null;
  pid: number;
  session: string | null;
}

/** Each spec measured over the same `seconds`, after `warmS`; written to `out` where given. */
export async function monitorCost(specs: string[], seconds: number, warmS: number, out?: string, windowS = Number(process.env.COST_WINDOW ?? 0)) {
  if (!tmux) throw new Error("this bench needs tmux");
  const subjects: Subject[] = specs.map((spec, i) => {
    const eq = spec.indexOf("=");
    if (eq < 0) throw new Error(`not LABEL=COMMAND: ${spec}`);
    const [label, key] = spec.slice(0, eq).split("@") as [string, string | undefined];
    const command = spec.slice(eq + 1);
    if (command.startsWith("pid:")) return { label, key: null, pid: Number(command.slice(4)), session: null };
    const session = `gpumem-cost-${process.pid}-${i}`;
    sh("kill-session", "-t", session);
    sh("new-session", "-d", "-s", session, "-x", "200", "-y", "60", `exec ${command}`);
    const pid = Number(sh("list-panes", "-t", session, "-F", "#{pane_pid}").trim());
    return { label, key: key ?? null, pid, session };
  });
  await Bun.sleep(1500);
  for (const s of subjects) if (s.session && s.key) sh("send-keys", "-t", s.session, s.key);
  await Bun.sleep(warmS * 1000);
  const usage = await Promise.all(subjects.map((s) => procUsage(s.pid, seconds, windowS).catch((e: Error) => ({ error: e.message }))));
  const panes = subjects.map((s) => (s.session ? sh("capture-pane", "-p", "-t", s.session) : ""));
  for (const s of subjects) if (s.session) sh("send-keys", "-t", s.session, "q");
  await Bun.sleep(500);
  for (const s of subjects) if (s.session) sh("kill-session", "-t", s.session);

  const runs = subjects.map((s, i) => {
    const u = usage[i]!;
    return "error" in u
      ? { label: s.label, key: s.key, error: u.error }
      : { label: s.label, key: s.key, cpu_percent_of_a_core: +u.cpuPercent.toFixed(2), max_rss_mib: +(u.maxRssBytes / 2 ** 20).toFixed(1), jit_percent_of_a_core: u.threads.JITWorker ?? 0, threads: u.threads, ...(u.windows ? { windows: u.windows } : {}) };
  });
  const result = { date: new Date().toISOString(), seconds, warmup_s: warmS, cores: navigator.hardwareConcurrency, specs, runs, panes };
  if (out) writeFileSync(out, `${JSON.stringify(result, null, 1)}\n`);
  for (const r of runs) console.log("error" in r ? `${r.label}: ${r.error}` : `${r.label.padEnd(28)} ${String(r.cpu_percent_of_a_core).padStart(6)} % of a core  ${r.max_rss_mib} MiB  (the engine's compiler ${r.jit_percent_of_a_core}%)`);
  for (const r of runs) if ("windows" in r && r.windows) console.log(`${r.label.padEnd(28)} by ${windowS} s, all threads (compiler): ${r.windows.map((w) => `${sum(w).toFixed(2)} (${w.JITWorker ?? 0})`).join(" ")}`);
  return result;
}

function sum(w: Record<string, number>): number {
  return Object.values(w).reduce((a, b) => a + b, 0);
}

if (import.meta.main) {
  const [out, secondsArg, warmArg, ...specs] = process.argv.slice(2);
  if (!out || !secondsArg || !warmArg || specs.length === 0) {
    process.stderr.write("usage: bun bench/monitor-cost.ts OUT.json SECONDS WARMUP_S 'LABEL[@KEY]=COMMAND' | 'LABEL=pid:PID' ...\n");
    process.exit(2);
  }
  await monitorCost(specs, Number(secondsArg), Number(warmArg), out);
}
