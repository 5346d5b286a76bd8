// What the test suite costs here: its wall time, its CPU (the runner's and its children's, from
// /usr/bin/time, plus the tmux panes', which are the tmux server's children and counted nowhere
// else: test/support/cpu.ts), and how busy the whole machine was meanwhile (/proc/stat), since
// two cores shared with other work bound the wall as much as the suite does.
//
//   bun bench/test-time.ts OUT_DIR -- bun run test     # run it: OUT_DIR/{output.txt,cpu.jsonl,load.txt,summary.json}
//   bun bench/test-time.ts OUT_DIR --summarize          # the summary of a run already there
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [out, ...rest] = process.argv.slice(2);
if (!out || (rest[0] !== "--" && rest[0] !== "--summarize")) {
  console.error("usage: bun bench/test-time.ts OUT_DIR -- COMMAND... | OUT_DIR --summarize");
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const files = { output: join(out, "output.txt"), cpu: join(out, "cpu.jsonl"), load: join(out, "load.txt"), summary: join(out, "summary.json") };

/** The machine's busy and total CPU ticks so far (/proc/stat's first line: all but idle and iowait). */
function machineTicks(): { busy: number; total: number } {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - f[3]! - f[4]!, total };
}

if (rest[0] === "--") {
  const cmd = rest.slice(1);
  const started = new Date().toISOString();
  const t0 = machineTicks();
  const samples: string[] = [];
  const sampler = setInterval(() => {
    const t = machineTicks();
    samples.push(`${new Date().toISOString()} busy ${t.busy} total ${t.total}`);
  }, 2000);
  const p = Bun.spawn(["/usr/bin/time", "-v", ...cmd], { env: { ...process.env, GPUMEM_TEST_CPU_REPORT: files.cpu }, stdout: "pipe", stderr: "pipe" });
  const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearInterval(sampler);
  const t1 = machineTicks();
  writeFileSync(files.output, `$ ${cmd.join(" ")}\n${o}${e}`);
  writeFileSync(files.load, `started ${started}\nstart busy ${t0.busy} total ${t0.total}\n${samples.join("\n")}\nend busy ${t1.busy} total ${t1.total}\n`);
}

// Kept gzip'd where committed (bench/results/test-time/*/output.txt.gz).
const text = existsSync(files.output) ? readFileSync(files.output, "utf8") : new TextDecoder().decode(Bun.gunzipSync(readFileSync(`${files.output}.gz`)));
const num = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
const clock = /Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)/.exec(text);
const wall = clock ? Number(clock[1] ?? 0) * 3600 + Number(clock[2]) * 60 + Number(clock[3]) : NaN;
const user = num(/User time \(seconds\): ([\d.]+)/);
const sys = num(/System time \(seconds\): ([\d.]+)/);
const cpuRows = existsSync(files.cpu) ? readFileSync(files.cpu, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l) as { what: string; cpu: number }) : [];
const tmux = cpuRows.filter((r) => r.what.endsWith(" (tmux)")).reduce((a, r) => a + r.cpu, 0);
let machine: { busy_cpu_s: number; cores_busy: number } | null = null;
if (existsSync(files.load)) {
  const l = readFileSync(files.load, "utf8");
  const s = /start busy (\d+) total (\d+)/.exec(l);
  const e = /end busy (\d+) total (\d+)/.exec(l);
  // USER_HZ ticks summed over the cores; 100 a second on Linux.
  if (s && e) machine = { busy_cpu_s: (Number(e[1]) - Number(s[1])) / 100, cores_busy: Number(((Number(e[1]) - Number(s[1])) / 100 / wall).toFixed(2)) };
}
const failed = [...new Set([...text.matchAll(/^\(fail\) (.*) \[[\d.]+m?s\]$/gm)].map((m) => m[1]!))];
const summary = {
  command: /^\$ (.*)$/m.exec(text)?.[1] ?? null,
  wall_s: wall,
  cpu_s: { runner_and_children: Number((user + sys).toFixed(1)), tmux_panes: Number(tmux.toFixed(1)), total: Number((user + sys + tmux).toFixed(1)) },
  machine_during_run: machine,
  tests: { pass: num(/^ *(\d+) pass$/m), skip: num(/^ *(\d+) skip$/m), fail: num(/^ *(\d+) fail$/m), ran: num(/^Ran (\d+) tests/m), files: num(/^Ran \d+ tests? across (\d+) files?/m) },
  failed,
};
writeFileSync(files.summary, `${JSON.stringify(summary, null, 2)}\n`);
console.log(`${out}: ${wall} s wall, ${summary.cpu_s.total} s CPU (${summary.cpu_s.tmux_panes} in tmux panes)` + (machine ? `, the machine ${machine.cores_busy} cores busy` : "") + `; ${summary.tests.pass} pass, ${summary.tests.fail} fail, ${summary.tests.skip} skip of ${summary.tests.ran} in ${summary.tests.files} files`);
