// The agents' directories are listed again only where they changed: the monitor scans them once a
// tick, and an idle machine's are the same every tick. What a listing kept says is what a new one
// would: a file made, renamed or removed moves the directory's mtime (the scan's trust check reads
// it), so it is listed again at once; one changed within its clock's step is not kept.
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, renameSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scanAgentDirs } from "../../src/collect/agent-dirs";
import { AgentWatcher } from "../../src/collect/agents";

function agentsDir(): string {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-listings-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}
const settle = (dir: string) => utimesSync(dir, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));

describe("the agents' directories, listed when they changed", () => {
  test("an unchanged directory is read once over many scans; a file made or renamed in it is seen at the next", () => {
    const dir = agentsDir();
    try {
      writeFileSync(join(dir, "notes.txt"), "");
      settle(dir);
      const w = new AgentWatcher(dir);
      for (let i = 0; i < 5; i++) expect(w.refresh()).toEqual([]);
      expect(w.dirListings.reads).toBe(1);
      // A manifest that does not parse (of a live pid: said, not removed as stale), renamed in as the agent writes its manifests: seen at once
      // (its problem said), then kept with the listing once settled.
      writeFileSync(join(dir, "x.tmp"), "{");
      renameSync(join(dir, "x.tmp"), join(dir, `${process.pid}.json`));
      w.refresh();
      expect(w.dirListings.reads).toBe(2);
      expect(w.problems.join("\n")).toContain(`${process.pid}.json`);
      settle(dir);
      w.refresh();
      w.refresh();
      expect(w.dirListings.reads).toBe(3);
      expect(w.problems.join("\n")).toContain(`${process.pid}.json`);
      w.close();
    } finally {
      rmSync(join(dir, ".."), { recursive: true, force: true });
    }
  });

  test("the scan's trust check gives each directory's mtime; a directory changed within the last second is listed every scan", () => {
    const dir = agentsDir();
    try {
      const scan = scanAgentDirs([dir]);
      expect(scan.dirs).toEqual([dir]);
      expect(scan.mtimes).toHaveLength(1);
      const w = new AgentWatcher(dir);
      w.refresh();
      w.refresh();
      expect(w.dirListings.reads).toBe(2);
      w.close();
    } finally {
      rmSync(join(dir, ".."), { recursive: true, force: true });
    }
  });
});
