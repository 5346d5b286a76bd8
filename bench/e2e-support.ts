// What the GPU end-to-end drivers (bench/e2e-gpu.ts, bench/e2e-hf.ts) share: what this machine
// has (GPUs as the monitor sees them, a Python, a tmux that can open a pane), a private tmux server
// to drive the screens in, processes from /proc, and byte figures as the screens print them.
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Document } from "../src/headless/schema";

export const ROOT = resolve(import.meta.dir, "..");
export const CLI = join(ROOT, "src", "cli.ts");
export const BUN = process.execPath;

export const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

export function lastLine(s: string): string {
  return s.trim().split("\n").filter(Boolean).pop() ?? "";
}

// ---- what this machine has -------------------------------------------------------------------------

/** The GPUs as the monitor itself sees them (`gpumem-tui --json --once`); `missing` says why none. */
export function probeGpus(): { gpus: string[]; driver: string | null; count: number; missing: string | null } {
  const once = Bun.spawnSync([BUN, CLI, "--json", "--once"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  try {
    const doc = JSON.parse(once.stdout.toString()) as Document;
    const gpus = doc.devices.map((d) => `${d.index}: ${d.name ?? "?"} (${d.uuid ?? "?"})`);
    const missing = doc.devices.length === 0 ? `no NVIDIA GPU: ${doc.reason ?? "NVML lists no devices"} (gpumem-tui --json --once)` : null;
    return { gpus, driver: doc.driver_version, count: doc.devices.length, missing };
  } catch {
    return { gpus: [], driver: null, count: 0, missing: `no NVIDIA GPU: \`gpumem-tui --json --once\` failed (exit ${once.exitCode}): ${lastLine(once.stderr.toString()) || "no output"}` };
  }
}

/** The interpreter named PYTHON (a path or a name on PATH), or null. */
export function findPython(name: string): string | null {
  return name.includes("/") ? (existsSync(name) ? name : null) : Bun.which(name);
}

/** tmux leaves a private server's socket file behind after kill-server: removed with it. */
export function killServer(tmux: string, socket: string): void {
  Bun.spawnSync([tmux, "-L", socket, "-f", "/dev/null", "kill-server"], { stdout: "ignore", stderr: "ignore" });
  rmSync(join(process.env.TMUX_TMPDIR || "/tmp", `tmux-${process.getuid?.() ?? 0}`, socket), { force: true });
}

export function probeTmux(tmux: string): string | null {
  // A private server with no user config, as the runs use; a sandbox without /dev/pts has
  // tmux but cannot open a pane.
  const socket = `gpumem-e2e-probe-${process.pid}`;
  const t = (...a: string[]) => Bun.spawnSync([tmux, "-L", socket, "-f", "/dev/null", ...a], { stdout: "pipe", stderr: "pipe" });
  const r = t("new-session", "-d", "-s", "probe", "-x", "40", "-y", "5", "/bin/sh", "-c", "echo tmux-pane-ok; sleep 30");
  if (r.exitCode !== 0) return `tmux cannot open a pane here: ${r.stderr.toString().trim() || "exit status non-zero"}`;
  try {
    for (let i = 0; i < 50; i++) {
      if (t("capture-pane", "-p", "-t", "probe").stdout.toString().includes("tmux-pane-ok")) return null;
      Bun.sleepSync(100);
    }
    return "tmux started a pane but /bin/sh printed nothing in it within 5 s";
  } finally {
    killServer(tmux, socket);
  }
}

/** tmux on PATH and a pane it can open: its path and version, or what is missing. */
export function findTmux(): { tmux: string | null; version: string | null; missing: string | null } {
  const tmux = Bun.which("tmux");
  if (!tmux) return { tmux: null, version: null, missing: "no tmux: install it (apt install tmux)" };
  const version = Bun.spawnSync([tmux, "-V"], { stdout: "pipe" }).stdout.toString().trim();
  const why = probeTmux(tmux);
  return { tmux, version, missing: why ? `no usable tmux: ${why}` : null };
}

export function gitCommit(): string | null {
  const git = Bun.which("git") ? Bun.spawnSync(["git", "-C", ROOT, "describe", "--always", "--dirty"], { stdout: "pipe", stderr: "pipe" }) : null;
  return git?.exitCode === 0 ? git.stdout.toString().trim() : null;
}

// ---- a private tmux server ---------------------------------------------------------------------------

export class Tmux {
  constructor(
    readonly bin: string,
    readonly socket: string,
  ) {}

  run(...a: string[]) {
    const r = Bun.spawnSync([this.bin, "-L", this.socket, "-f", "/dev/null", ...a], { stdout: "pipe", stderr: "pipe" });
    return { ok: r.exitCode === 0, out: r.stdout.toString(), err: r.stderr.toString().trim() };
  }
  pane(s: string): string {
    return this.run("capture-pane", "-p", "-t", s).out;
  }
  keys(s: string, ...k: string[]) {
    return this.run("send-keys", "-t", s, ...k);
  }
  /** Characters typed as they are (no key names). */
  type(s: string, text: string) {
    return this.run("send-keys", "-t", s, "-l", text);
  }
  /** /bin/sh runs `script` in a detached session; the pane stays after it ends. */
  start(name: string, cols: number, rows: number, script: string): void {
    const r = this.run("new-session", "-d", "-s", name, "-x", String(cols), "-y", String(rows), "/bin/sh", "-c", script);
    if (!r.ok) throw new Error(`tmux new-session failed: ${r.err}`);
  }
  /** The pid of the pane's first process (the /bin/sh that runs the script). */
  panePid(s: string): number | null {
    const n = Number(this.run("list-panes", "-t", s, "-F", "#{pane_pid}").out.trim().split("\n")[0]);
    return n > 0 ? n : null;
  }
  async until(s: string, what: string | RegExp | ((text: string) => boolean), timeoutMs: number, label = String(what)): Promise<string> {
    const t0 = Date.now();
    for (;;) {
      const text = this.pane(s);
      const hit = typeof what === "string" ? text.includes(what) : what instanceof RegExp ? what.test(text) : what(text);
      if (hit) return text;
      if (Date.now() - t0 > timeoutMs) throw new Error(`never saw ${label} within ${timeoutMs / 1000} s; the pane:\n${text.trimEnd()}`);
      await Bun.sleep(200);
    }
  }
  kill(): void {
    killServer(this.bin, this.socket);
  }
}

export async function waitFor<T>(fn: () => T | null | undefined | false, timeoutMs: number, what: string): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await Bun.sleep(250);
  }
}

// ---- processes ---------------------------------------------------------------------------------------

function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

export function alive(pid: number): boolean {
  const f = statFields(pid);
  return !!f && f[0] !== "Z";
}

export function ppid(pid: number): number | null {
  const f = statFields(pid);
  return f ? Number(f[1]) : null;
}

export function children(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) if (/^\d+$/.test(name) && ppid(Number(name)) === pid) out.push(Number(name));
  return out.sort((a, b) => a - b);
}

let clockTicks = 0;
/** A process's own CPU time (user + system, seconds) and resident memory (bytes), or null once gone. */
export function usage(pid: number): { cpu_s: number; rss_bytes: number } | null {
  clockTicks ||= Number(Bun.spawnSync(["getconf", "CLK_TCK"], { stdout: "pipe", stderr: "ignore" }).stdout.toString().trim()) || 100;
  const f = statFields(pid);
  if (!f) return null;
  let rss = Number.NaN;
  try {
    rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) * 1024;
  } catch {
    return null;
  }
  return { cpu_s: (Number(f[11]) + Number(f[12])) / clockTicks, rss_bytes: rss };
}

// ---- figures -----------------------------------------------------------------------------------------

export const UNITS: Record<string, number> = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40 };
export const BYTES = String.raw`-?\d+(?:\.\d+)? (?:B|KiB|MiB|GiB|TiB)`;
export function parseBytes(s: string): number {
  const [v, u] = s.trim().split(" ");
  return Number(v) * (UNITS[u ?? "B"] ?? Number.NaN);
}
export const mib = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;
export const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : Number.NaN);

/** A figure for a report: large byte counts with MiB beside them. */
export function show(v: unknown): string {
  if (typeof v === "number" && Number.isInteger(v) && Math.abs(v) >= 2 ** 20) return `${v} (${mib(v)})`;
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}
