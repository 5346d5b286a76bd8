// The agents' directory from the monitor's side (src/collect/agent-dirs.ts) against names other
// users took: a link is never followed (nothing is deleted behind it), and the private fallback an
// agent takes (agent/gpumem_agent/paths.py, run here for real) is found. Another user is a spare
// uid under setpriv, so those cases need root: skipped, and said, otherwise.
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agentDirBases, MAX_SIBLINGS, ParentListings, scanAgentDirs } from "../../src/collect/agent-dirs";
import { AgentWatcher } from "../../src/collect/agents";
import { Machine } from "../../src/collect/machine";
import { Session } from "../../src/collect/session";
import { liveModels } from "../../src/commands/live-models";
import { openRing } from "../../src/ffi/ring";

const AGENT = join(import.meta.dir, "..", "..", "agent");
const OTHER = 4242;
const root = process.getuid?.() === 0;
const asRoot = root ? test : test.skip;
if (!root) console.log("skipped: cases with another uid and tmpfs mounts need root (setpriv, mount)");

/** A directory anyone can create names in, as /dev/shm and /tmp are. */
function sharedDir(): string {
  const d = mkdtempSync(join(tmpdir(), "gpumem-dirs-"));
  chmodSync(d, 0o1777);
  return d;
}

function asOther(...cmd: string[]): void {
  const p = Bun.spawnSync(["setpriv", "--reuid", String(OTHER), "--regid", String(OTHER), "--clear-groups", ...cmd], { stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`setpriv ${cmd.join(" ")}: ${p.stderr}`);
}

// The agent's file creation as agent.py does it, without torch: the directory (with its fallback),
// the backed ring, the manifest; then it waits (alive) until its stdin closes.
const AGENT_FILES = `
import json, os, sys
sys.path.insert(0, ${JSON.stringify(AGENT)})
from gpumem_agent import paths, ring
d, note = paths.open_agent_dir(sys.argv[1])
pid = os.getpid()
r, ring_note = ring.create_backed(os.path.join(d, "%d.ring" % pid), 1024, 1)
notes = {k: v for k, v in (("directory", note), ("ring", ring_note)) if v}
m = {"version": 1, "pid": pid, "cmdline": ["python", "train.py"], "devices": [0], "torch_version": "2.11.0",
     "hook_mode": "polling", "ring": r.path, "socket": os.path.join(d, "%d.sock" % pid), "notes": notes}
paths.write_private(os.path.join(d, "%d.json" % pid), json.dumps(m).encode())
print(json.dumps({"dir": d, "notes": notes}), flush=True)
sys.stdin.read()
`;

async function startAgent(base: string) {
  const p = Bun.spawn(["python3", "-c", AGENT_FILES, base], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const reader = p.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the agent's files were not made (exit ${await p.exited})`);
    text += new TextDecoder().decode(value);
  }
  const { dir, notes } = JSON.parse(text) as { dir: string; notes: Record<string, string> };
  return { p, dir, notes };
}

describe("the agents' directory, from the monitor", () => {
  test("a link at the directory's name: refused, and nothing behind it is deleted", async () => {
    // Another user's link to a directory of ours that happens to hold files named like an agent's.
    const target = mkdtempSync(join(tmpdir(), "gpumem-victim-"));
    const dead = Bun.spawn(["true"]);
    await dead.exited;
    const files = [`${dead.pid}.json`, `${dead.pid}.ring`, `${dead.pid}.sock`, "7.json"];
    writeFileSync(join(target, files[0]!), JSON.stringify({ version: 1, pid: dead.pid, cmdline: ["x"], devices: [0], torch_version: "2", hook_mode: "hook", ring: "/nonexistent", socket: "/nonexistent" }), { mode: 0o600 });
    for (const f of files.slice(1)) writeFileSync(join(target, f), "mine", { mode: 0o600 });
    const base = join(sharedDir(), "agents");
    symlinkSync(target, base);
    const w = new AgentWatcher(base);
    const found = w.refresh();
    expect(readdirSync(target).sort()).toEqual(files.sort());
    expect(found).toEqual([]);
    expect(w.problems).toEqual([`agent directory ${base} is a symbolic link: ignored`]);
  });

  const squats: [string, (base: string) => void, string][] = [
    ["taken by another user", (base) => asOther("mkdir", "-m", "0700", base), `owned by uid ${OTHER}, not by you`],
    ["taken by another user open to all (mkdir -m 777)", (base) => asOther("mkdir", "-m", "0777", base), `owned by uid ${OTHER}, not by you`],
    ["a link", (base) => symlinkSync(mkdtempSync(join(tmpdir(), "gpumem-elsewhere-")), base), "a symbolic link"],
    ["open to everyone", (base) => (mkdirSync(base), chmodSync(base, 0o777)), "open to other users (mode 777)"],
  ];
  for (const [what, squat, why] of squats) {
    (what.includes("another user") ? asRoot : test)(`a name ${what}: the agent takes a private fallback, the monitor finds it and says why`, async () => {
      const base = join(sharedDir(), "agents");
      squat(base);
      const agent = await startAgent(base);
      try {
        expect(agent.dir.startsWith(`${base}.`)).toBe(true);
        expect(agent.notes.directory).toContain(`using ${agent.dir} instead (the monitor finds it too)`);
        const w = new AgentWatcher(base);
        const [a, ...rest] = w.refresh();
        expect(rest).toEqual([]);
        expect([a!.pid, a!.problem, a!.exited, a!.header?.pid]).toEqual([agent.p.pid, null, false, agent.p.pid]);
        expect(a!.manifest.notes.directory).toBe(agent.notes.directory!);
        expect(w.problems).toEqual([expect.stringContaining(`agent directory ${base} is ${why}`)]);
        // At exit its stale files go, through the fallback it was found in.
        agent.p.stdin.end();
        await agent.p.exited;
        expect(w.refresh()[0]!.exited).toBe(true);
        expect(readdirSync(agent.dir)).toEqual([]);
        w.close();
      } finally {
        agent.p.kill();
      }
    });
  }

  asRoot("a fallback-shaped name of another user is neither read nor taken", async () => {
    const base = join(sharedDir(), "agents");
    symlinkSync("/", base);
    asOther("mkdir", "-m", "0700", `${base}.aaaaaaaa`);
    const scan = scanAgentDirs([base]);
    expect(scan.dirs).toEqual([]);
    expect(scan.problems).toEqual([`agent directory ${base} is a symbolic link: ignored`, `agent directory ${base}.aaaaaaaa is owned by uid ${OTHER}, not by you (0): ignored`]);
    const agent = await startAgent(base);
    agent.p.stdin.end();
    await agent.p.exited;
    expect(agent.dir).not.toBe(`${base}.aaaaaaaa`);
    expect(scanAgentDirs([base]).dirs).toEqual([agent.dir]);
  });

  test("the runtime directory is read where it is private; GPUMEM_TUI_DIR alone where set", () => {
    const uid = process.getuid?.() ?? 0;
    const shm = existsSync("/dev/shm") ? `/dev/shm/gpumem-tui-${uid}` : join(tmpdir(), `gpumem-tui-${uid}`);
    const run = mkdtempSync(join(tmpdir(), "gpumem-run-"));
    expect(agentDirBases({ XDG_RUNTIME_DIR: run })[0]).toBe(join(run, "gpumem-tui"));
    expect(agentDirBases({ XDG_RUNTIME_DIR: run }).at(-1)).toBe(shm);
    chmodSync(run, 0o755);
    expect(agentDirBases({ XDG_RUNTIME_DIR: run })).not.toContain(join(run, "gpumem-tui"));
    expect(agentDirBases({ XDG_RUNTIME_DIR: run, GPUMEM_TUI_DIR: "/x/agents" })).toEqual(["/x/agents"]);
  });

  asRoot("a ring with no room for records (a full tmpfs) is still read: the header's totals", async () => {
    const fs = mkdtempSync(join(tmpdir(), "gpumem-tmpfs-"));
    expect(Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=128k,mode=0700", "tmpfs", fs]).exitCode).toBe(0);
    try {
      const agent = await startAgent(join(fs, "agents"));
      expect(agent.notes.ring).toMatch(/^no event records, totals only \(polling\)/);
      const ring = openRing(join(agent.dir, `${agent.p.pid}.ring`));
      expect(ring.header().pid).toBe(agent.p.pid);
      ring.close();
      agent.p.kill();
      await agent.p.exited;
    } finally {
      Bun.spawnSync(["umount", "-l", fs]);
    }
  });
  test("the parent is listed again only when it changed or its listing aged: a base made after a listing is found at the next scan", () => {
    const parent = sharedDir();
    const base = join(parent, "agents");
    for (let i = 0; i < 2000; i++) writeFileSync(join(parent, `torch_${i}`), ""); // a DataLoader's files
    const listings = new ParentListings();
    const minuteAgo = new Date(Date.now() - 60_000);
    const settle = () => utimesSync(parent, minuteAgo, minuteAgo);
    settle();
    expect(listings.names(base)).toEqual([]);
    // Made since: the parent's mtime moved, so it is listed again at once.
    mkdirSync(base, { mode: 0o700 });
    expect(listings.names(base)).toEqual(["agents"]);
    expect(scanAgentDirs([base], undefined, listings).dirs).toEqual([base]);
    // Settled and listed: a name that appears while the mtime stays put (a coarse clock) is found
    // once the listing ages, not before; the listing kept is the one used.
    settle();
    expect(listings.names(base)).toEqual(["agents"]);
    mkdirSync(`${base}.abcdefgh`, { mode: 0o700 });
    settle();
    expect(listings.names(base)).toEqual(["agents"]);
    expect(listings.names(base, Date.now() + 10_001)).toEqual(["agents", "agents.abcdefgh"]);
    // A parent changed within the last second is not kept: a name made within its clock's step,
    // the mtime left as the listing saw it, is found by the next call.
    const now = new Date();
    utimesSync(parent, now, now);
    expect(listings.names(base)).toEqual(["agents", "agents.abcdefgh"]);
    mkdirSync(`${base}.ijklmnop`, { mode: 0o700 });
    utimesSync(parent, now, now);
    expect(listings.names(base)).toEqual(["agents", "agents.abcdefgh", "agents.ijklmnop"]);
    expect(new ParentListings().names(join(parent, "gone", "agents"))).toBeNull();
  });
  // Another user floods the parent with names shaped like our fallbacks, and squats the base: the
  // agent still takes a fallback of its own that the monitor finds, and every document says so in
  // two lines (the base, and the count of the rest), not one line a planted name.
  asRoot("20,000 fallback-shaped names of another user: one warning, the agent still found, each tick cheap", async () => {
    const base = join(sharedDir(), "agents");
    const plant = `import os\nos.mkdir(${JSON.stringify(base)}, 0o777)\nfor i in range(20000): os.mkdir(${JSON.stringify(base)} + ".x%05d" % i, 0o700)`;
    asOther("/usr/bin/python3", "-c", plant);
    const agent = await startAgent(base);
    try {
      const session = new Session(new Machine({ agentDir: base }), liveModels({ keepTrace: false }));
      const t0 = performance.now();
      let doc = session.tick();
      const first = performance.now() - t0;
      const parent = join(base, "..");
      const mine = doc.warnings.filter((w) => w.includes(parent));
      expect(mine).toEqual([
        `agent directory ${base} is owned by uid ${OTHER}, not by you (0): ignored`,
        `20000 directories named like agents.* in ${parent} are not private directories of yours (owned by uid ${OTHER}: 20000): ignored`,
      ]);
      expect(doc.processes.some((p) => p.pid === agent.p.pid || p.agent_pid === agent.p.pid)).toBe(true);
      expect(JSON.stringify(doc).length).toBeLessThan(64 << 10);
      // The parent listed again (it changed): the planted names' owners are known, not asked again.
      const old = new Date(Date.now() - 60_000);
      utimesSync(parent, old, old);
      const t1 = performance.now();
      doc = session.tick();
      const relisted = performance.now() - t1;
      expect(doc.warnings.filter((w) => w.includes(parent))).toEqual(mine);
      // The parent unchanged: neither listed nor looked at again.
      const t2 = performance.now();
      for (let i = 0; i < 5; i++) doc = session.tick();
      const later = (performance.now() - t2) / 5;
      expect(doc.warnings.filter((w) => w.includes(parent))).toEqual(mine);
      console.log(`20,000 planted names: first tick ${first.toFixed(0)} ms, relisted ${relisted.toFixed(0)} ms, later ticks ${later.toFixed(1)} ms each`);
      expect(first).toBeLessThan(3000);
      expect(relisted).toBeLessThan(first);
      expect(later).toBeLessThan(50);
    } finally {
      agent.p.kill();
    }
  }, 60_000);

  test("one line for many fallback-shaped names not ours; past the cap the rest are counted, not read", () => {
    const parent = sharedDir();
    const base = join(parent, "agents");
    for (const x of ["aaaa", "bbbb", "cccc"]) chmodSync((mkdirSync(`${base}.${x}`), `${base}.${x}`), 0o777);
    expect(scanAgentDirs([base]).problems).toEqual([
      `3 directories named like agents.* in ${parent} are not private directories of yours (open to other users (mode 777): 3): ignored`,
    ]);
    const capped = new ParentListings(2);
    expect(capped.listing(base)!.beyond).toBe(1);
    expect(scanAgentDirs([base], undefined, capped).problems).toEqual([
      `at least 2 directories named like agents.* in ${parent} are not private directories of yours (open to other users (mode 777): 2; 1 more such names past the first 2 not read): ignored`,
    ]);
    expect(MAX_SIBLINGS).toBeGreaterThanOrEqual(20_000);
  });
});
