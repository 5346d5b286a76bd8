// Another user took the name of this user's agents' directory first (`mkdir -m 777` where the
// parent is open to all, as /dev/shm is): attach is not blocked, its token goes where the agent
// goes, a private sibling `<name>.<random>` (agent/gpumem_agent/paths.py open_agent_dir), and
// nothing is written into the squatted one. Needs root for the second uid (setpriv).
import { expect, test } from "bun:test";
import { chmodSync, lstatSync, readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { detachProcess } from "../../src/commands/detach";
import { ROOT } from "../../src/root";
import { asUid, attach, probeRecords, startTarget, testEnv } from "./support";

const root = process.getuid?.() === 0;
const OTHER = 5000;
if (!root) console.log("skipped: a squatted agents' directory needs root (another uid through setpriv)");

/** The directory the agent itself takes for `base` (paths.py), asked of the agent's own code. */
function agentsChoice(base: string): string {
  const code = `import sys; sys.path.insert(0, ${JSON.stringify(join(ROOT, "agent"))}); from gpumem_agent import paths; print(paths.open_agent_dir(${JSON.stringify(base)})[0])`;
  return Bun.spawnSync(["python3", "-c", code]).stdout.toString().trim();
}

test.skipIf(!root)("a squatted agents' directory: the token goes to a private sibling, the one the agent takes", async () => {
  const env = testEnv();
  const base = env.GPUMEM_TUI_DIR;
  chmodSync(dirname(base), 0o1777); // open to all, sticky: as /dev/shm and /tmp are
  const squat = Bun.spawnSync([...asUid(OTHER), "mkdir", "-m", "777", base], { stderr: "pipe" });
  expect(squat.stderr.toString()).toBe("");
  const t = await startTarget("serve", 0, `${base}.stop`);
  const said: string[] = [];
  try {
    const r = await attach(t.pid, env, { say: (l) => said.push(l) });
    // Before: "attach PID refused: the agents' directory … is owned by uid 5000, not by you (0)".
    expect(r.ok).toBe(true);
    const siblings = readdirSync(dirname(base)).filter((n) => n.startsWith(`${basename(base)}.`) && !n.endsWith(".stop"));
    expect(siblings).toHaveLength(1);
    const sibling = join(dirname(base), siblings[0]!);
    const st = lstatSync(sibling);
    expect({ dir: st.isDirectory(), uid: st.uid, mode: st.mode & 0o777 }).toEqual({ dir: true, uid: 0, mode: 0o700 });
    expect(said).toEqual([`the agents' directory ${base} is owned by uid ${OTHER}, not by you (0); using ${sibling} instead (the agent and the monitor find it too)`]);
    // The bootstrap found its token there (the probe payload writes beside it), the manifest is
    // found there, and the agent's own rule picks that same directory.
    expect((r as { manifest: string | null }).manifest).toBe(join(sibling, `${t.pid}.json`));
    expect(probeRecords({ GPUMEM_TUI_DIR: sibling }, t.pid)).toHaveLength(1);
    expect(agentsChoice(base)).toBe(sibling);
    expect(readdirSync(base)).toEqual([]); // nothing of ours in the squatted directory
    expect((await detachProcess(t.pid, env)).ok).toBe(true);
  } finally {
    await Bun.write(`${base}.stop`, "");
    expect(await t.done).toEqual({ stdout: "checksum served\n", code: 0 });
  }
}, 30_000);
