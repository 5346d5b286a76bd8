// Multi-rank jobs on one host: ranks grouped under their launcher, on documents built from the
// training runs recorded on an H100 (each rank a recorded ring, its manifest given a rank).
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { commonCommand, groupJobs, jobNotes, rankList, type JobMember } from "../../src/system/jobs";
import { parseManifest } from "../../src/system/manifest";
import { parseStatPpid, processInfo } from "../../src/collect/procfs";
import { Machine } from "../../src/collect/machine";
import { DocumentSchema, JobSchema, jsonSchema, SCHEMA_VERSION, type Process } from "../../src/system/schema";
import training from "../fixtures/h100-training.json";
import { hostDocument, TORCHRUN, type RankSpec } from "../support/jobs";
import { produce } from "../support/native";

const FIXTURES = join(import.meta.dir, "..", "fixtures");
const facts = (name: string) => JSON.parse(readFileSync(join(FIXTURES, `${name}.facts.json`), "utf8"));
const pidOf = (name: string) => JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), "utf8")).pid as number;

describe("the parent pid", () => {
  test("read from /proc/PID/stat, whatever the command name holds", () => {
    expect(parseStatPpid("1280 (python3) S 4700 1280 1 0 -1 4194560 0 0")).toBe(4700);
    expect(parseStatPpid("1280 (pt_main (thread) 2) R 4700 1280 1 0")).toBe(4700);
    expect(parseStatPpid("1 (systemd) S 0 1 1 0")).toBe(0);
    expect(parseStatPpid("")).toBeNull();
    expect(parseStatPpid("1280 (cut")).toBeNull();
  });

  test("processInfo gives this process's parent", () => {
    expect(processInfo(process.pid).ppid).toBe(process.ppid);
    expect(processInfo(2 ** 30).ppid).toBeNull();
  });

  test("the manifest takes an optional job id, null where absent", () => {
    const text = readFileSync(join(FIXTURES, "normal.json"), "utf8");
    expect(parseManifest(text, "normal.json").job).toBeNull();
    const withJob = JSON.stringify({ ...JSON.parse(text), job: "c1f0-run" });
    expect(parseManifest(withJob, "x.json").job).toBe("c1f0-run");
  });
});

describe("grouping", () => {
  test("ranks of one launcher are one job: ranks in order, the missing one named, totals and steps from the recorded runs", () => {
    const doc = hostDocument(TORCHRUN);
    expect(doc.jobs).toHaveLength(1);
    const job = doc.jobs[0]!;
    const [r0, r1, r2] = ["normal", "no-zero-grad", "kept-loss-graph"];
    expect(job.id).toBe("ppid:4700");
    expect(job.launcher_pid).toBe(4700);
    expect(job.name).toBe("python3 train.py --epochs 3");
    expect(job.world_size).toBe(4);
    expect(job.pids).toEqual([pidOf(r0), pidOf(r1), pidOf(r2)]);
    expect(job.ranks.map((r) => [r.rank, r.device])).toEqual([[0, 0], [1, 1], [2, 2]]);
    expect(job.missing_ranks).toEqual([3]);
    // The agents' figures are torch's own at the end of each run.
    for (const [i, name] of [r0, r1, r2].entries()) {
      expect(job.ranks[i]!.allocated_bytes).toBe(facts(name).memory_allocated);
      expect(job.ranks[i]!.peak_allocated_bytes).toBe(facts(name).max_memory_allocated);
      expect(job.ranks[i]!.step).toBe(facts(name).steps);
    }
    expect(job.allocated_bytes).toBe(facts(r0).memory_allocated + facts(r1).memory_allocated + facts(r2).memory_allocated);
    expect(job.reserved_bytes).toBe(facts(r0).memory_reserved + facts(r1).memory_reserved + facts(r2).memory_reserved);
    expect(job.used_bytes).toBe(doc.processes.filter((p) => job.pids.includes(p.pid)).reduce((a, p) => a + p.used_bytes!, 0));
    expect([job.step_min, job.step_max]).toEqual([12, 20]);
    // kept-loss-graph keeps every step's graph alive: its rank peaks far above the others.
    expect(job.peak_rank).toBe(2);
    expect(job.peak_allocated_bytes).toBe(facts(r2).max_memory_allocated);
    expect(job.peak_margin_bytes).toBe(facts(r2).max_memory_allocated - facts(r1).max_memory_allocated);
    expect(job.state).toBe("incomplete");
    expect(jobNotes(job)).toEqual(["incomplete: rank 3 missing", "steps 12-20, ranks 1-2 behind", "rank 2 peaks 384.19 MiB above the others"]);
  });

  test("processes that are no rank of a multi-rank job stay as they were", () => {
    const doc = hostDocument(TORCHRUN);
    const alone = hostDocument(TORCHRUN.map((s) => ({ ...s, rank: null, world_size: null })));
    expect(alone.jobs).toEqual([]);
    // The process rows are the same with or without the job (but for the rank they carry).
    const strip = (ps: Process[]) => ps.map((p) => ({ ...p, pytorch: p.pytorch && { ...p.pytorch, rank: null } }));
    expect(strip(doc.processes)).toEqual(strip(alone.processes));
    const grouped = new Set(doc.jobs.flatMap((j) => j.pids));
    expect(grouped.has(pidOf("oom"))).toBe(false); // an agent with no rank
    expect(grouped.has(training.processes[0]!.pid)).toBe(false); // a process with no agent
  });

  test("node 1 of a two-node job: only this node's block of ranks can be missing; the others are elsewhere, not gone", () => {
    const node1 = (r: number, fixture: string, device: number): RankSpec => ({ fixture, rank: r, local_rank: r - 4, world_size: 8, local_world_size: 4, group_rank: 1, ppid: 4700, device });
    const doc = hostDocument([node1(4, "normal", 0), node1(5, "no-zero-grad", 1), node1(7, "kept-loss-graph", 2)]);
    const job = doc.jobs[0]!;
    expect(job.host_ranks).toEqual({ first: 4, count: 4 });
    expect(job.missing_ranks).toEqual([6]);
    expect(job.state).toBe("incomplete");
    expect(jobNotes(job)[0]).toBe("incomplete: rank 6 missing");
    // Where the ranks do not say (no torchrun variables), every rank not here counts as missing.
    const unknown = hostDocument([0, 1, 2].map((r, i) => ({ ...node1(r + 4, ["normal", "no-zero-grad", "kept-loss-graph"][i]!, i), local_world_size: null, group_rank: null })));
    expect(unknown.jobs[0]!.host_ranks).toBeNull();
    expect(unknown.jobs[0]!.missing_ranks).toEqual([0, 1, 2, 3, 7]);
  });

  test("a world size of 1, or an unknown parent with no job id, makes no job", () => {
    const doc = hostDocument([
      { fixture: "normal", rank: 0, world_size: 1, ppid: 4700, device: 0 },
      { fixture: "no-zero-grad", rank: 0, world_size: 2, ppid: null, device: 1 },
    ]);
    expect(doc.jobs).toEqual([]);
  });

  test("mixed: two launchers are two jobs; a job id groups ranks whatever their parents; one launcher's two world sizes are two jobs", () => {
    const specs: RankSpec[] = [
      { fixture: "normal", rank: 0, world_size: 2, ppid: 4700, device: 0 },
      { fixture: "no-zero-grad", rank: 1, world_size: 2, ppid: 4700, device: 1 },
      { fixture: "kept-loss-graph", rank: 1, world_size: 2, ppid: 4800, device: 2, command: "python3 eval.py" },
      { fixture: "oom", rank: 0, world_size: 2, ppid: 4800, device: 3, command: "python3 eval.py" },
    ];
    const two = hostDocument(specs);
    expect(two.jobs.map((j) => [j.id, j.name, j.pids, j.missing_ranks])).toEqual([
      ["ppid:4700", "python3 train.py --epochs 3", [pidOf("normal"), pidOf("no-zero-grad")], []],
      ["ppid:4800", "python3 eval.py", [pidOf("oom"), pidOf("kept-loss-graph")], []],
    ]);

    const byId = hostDocument(specs.map((s, i) => ({ ...s, ppid: 5000 + i, job: "run-7", rank: i, world_size: 4 })));
    expect(byId.jobs).toHaveLength(1);
    expect(byId.jobs[0]!.id).toBe("run-7");
    expect(byId.jobs[0]!.launcher_pid).toBeNull(); // no parent in common
    expect(byId.jobs[0]!.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    expect(byId.jobs[0]!.name).toBe("python3"); // the words the command lines share

    const elastic = hostDocument([
      { fixture: "normal", rank: 0, world_size: 2, ppid: 4700, device: 0 },
      { fixture: "no-zero-grad", rank: 0, world_size: 4, ppid: 4700, device: 1 },
    ]);
    expect(elastic.jobs.map((j) => j.id)).toEqual(["ppid:4700:world_size=2", "ppid:4700:world_size=4"]);
  });

  test("a rank that exited stays in its job, said so; one NVML does not list keeps its agent's figures", () => {
    const doc = hostDocument([
      { fixture: "normal", rank: 0, world_size: 2, ppid: null, job: "run-8", device: 0 },
      { fixture: "oom", rank: 1, world_size: 2, ppid: null, job: "run-8", device: 1, exited: true, nvml: false },
    ]);
    const job = doc.jobs[0]!;
    expect(job.ranks.map((r) => [r.rank, r.exited])).toEqual([[0, false], [1, true]]);
    expect(job.ranks[1]!.allocated_bytes).toBe(facts("oom").memory_allocated);
    expect(job.used_bytes).toBe(doc.processes.find((p) => p.pid === pidOf("normal"))!.used_bytes);
    // Its ring was never closed (the agent did not detach): killed or crashed, not finished.
    expect(job.ranks[1]!.died).toBe(true);
    expect(job.state).toBe("incomplete");
    // A rank that is gone is said gone, not behind.
    expect(job.behind_ranks).toEqual([]);
    expect(jobNotes(job)).toEqual(["incomplete: rank 1 killed or crashed"]);
  });

  test("a job whose ranks all exited: ended when every agent detached, incomplete when one died", () => {
    const ranks = (closed1: boolean) =>
      hostDocument([
        { fixture: "normal", rank: 0, world_size: 2, ppid: 4800, device: 0, exited: true, closed: true },
        { fixture: "oom", rank: 1, world_size: 2, ppid: 4800, device: 1, exited: true, closed: closed1 },
      ]).jobs[0]!;
    expect(ranks(true).state).toBe("ended");
    expect(jobNotes(ranks(true))[0]).toBe("ranks 0-1 exited");
    expect(ranks(false).state).toBe("incomplete");
    expect(jobNotes(ranks(false)).slice(0, 2)).toEqual(["incomplete: rank 1 killed or crashed", "rank 0 exited"]);
  });

  test("behind: more than a step AND more than the seconds threshold; ranks a step apart, or steps apart by milliseconds, are not", () => {
    const doc = hostDocument(TORCHRUN, 4, { profiles: true });
    const job = doc.jobs[0]!;
    // Each rank's step time is its recording's last step, as the monitor's model timed it.
    const lastStep = (pid: number) => doc.processes.find((p) => p.pid === pid)!.pytorch!.profile!.last_step!;
    expect(job.ranks.map((r) => r.step_seconds)).toEqual(job.ranks.map((r) => lastStep(r.pid).duration_us! / 1e6));
    expect(job.ranks.map((r) => lastStep(r.pid).step)).toEqual(job.ranks.map((r) => r.step! - 1));
    expect(job.ranks.every((r) => r.step_seconds! > 0 && r.step_seconds! < 0.05)).toBe(true);
    // Steps 12-20 on the recorded H100 runs: 8 steps of ~6 ms, 45 ms apart: not behind.
    expect([job.step_min, job.step_max]).toEqual([12, 20]);
    expect(job.behind_ranks).toEqual([]);
    expect(jobNotes(job).some((n) => n.includes("behind"))).toBe(false);
    // The same ranks with the leading rank's steps taking 2 s: 8 steps are 16 s, more than the threshold.
    const regroup = (step: (p: Process) => number, lastUs: (p: Process) => number) => {
      const processes = doc.processes.map((p) => (p.pytorch?.profile?.last_step ? { ...p, pytorch: { ...p.pytorch, step: step(p), profile: { ...p.pytorch.profile, last_step: { ...p.pytorch.profile.last_step, duration_us: lastUs(p) } } } } : p));
      const members: JobMember[] = job.ranks.map((r) => ({ pid: r.pid, ppid: 4700, rank: r.rank, local_rank: r.local_rank, world_size: 4, job: null, command: "python3 train.py", exited: false }));
      return groupJobs(processes, members)[0]!;
    };
    const rank0 = job.ranks[0]!.pid;
    const slow = regroup((p) => p.pytorch!.step, () => 2_000_000);
    expect(slow.behind_ranks).toEqual([1, 2]);
    expect(jobNotes(slow)).toContain("steps 12-20, ranks 1-2 behind");
    // Steps 524-525 (one step apart), whatever the step time: not behind.
    const oneApart = regroup((p) => (p.pid === rank0 ? 525 : 524), () => 60_000_000);
    expect([oneApart.step_min, oneApart.step_max]).toEqual([524, 525]);
    expect(oneApart.behind_ranks).toEqual([]);
    expect(jobNotes(oneApart).some((n) => n.includes("behind"))).toBe(false);
    // Two steps apart at 4 s a step (8 s): under the seconds threshold; at 6 s a step (12 s): behind.
    expect(regroup((p) => (p.pid === rank0 ? 526 : 524), () => 4_000_000).behind_ranks).toEqual([]);
    expect(regroup((p) => (p.pid === rank0 ? 526 : 524), () => 6_000_000).behind_ranks).toEqual([1, 2]);
  });

  test("one rank killed, the launcher stopping the others: the first to die named, the others stopped by the launcher", () => {
    // Four ranks of one torchrun, every ring left open; rank 2's agent fell silent 3 s before the others'.
    const t = 1_795_000_000_000;
    const specs: RankSpec[] = ["normal", "no-zero-grad", "kept-loss-graph", "oom"].map((fixture, rank) => ({ fixture, rank, world_size: 4, ppid: 4700, device: rank, exited: true, closed: false, heard_unix_ms: rank === 2 ? t - 3000 : t + rank * 40 }));
    const job = hostDocument(specs).jobs[0]!;
    expect(job.first_died).toBe(2);
    expect(job.state).toBe("incomplete");
    expect(jobNotes(job).slice(0, 2)).toEqual(["incomplete: rank 2 died first (killed or crashed)", "ranks 0-1, 3 stopped by the launcher"]);
    // Where no rank fell silent clearly first (within half a second of each other), none is named.
    const together = hostDocument(specs.map((s) => ({ ...s, heard_unix_ms: t + s.rank! * 100 }))).jobs[0]!;
    expect(together.first_died).toBeNull();
    expect(jobNotes(together)[0]).toBe("incomplete: ranks 0-3 killed or crashed");
    // Ranks of no common launcher (grouped by a job id): no launcher stopped them.
    expect(hostDocument(specs.map((s, i) => ({ ...s, ppid: 5000 + i, job: "run-9" }))).jobs[0]!.first_died).toBeNull();
  });

  test("a rank NVML lists on two devices is counted once", () => {
    const doc = hostDocument(TORCHRUN);
    const pid = pidOf("normal");
    const row = doc.processes.find((p) => p.pid === pid)!;
    const processes = [...doc.processes, { ...row, device: 3, used_bytes: 500 * 1024 * 1024 }];
    const members: JobMember[] = doc.jobs[0]!.ranks.map((r) => ({ pid: r.pid, ppid: 4700, rank: r.rank, local_rank: r.local_rank, world_size: 4, job: null, command: "python3 train.py", exited: false }));
    const [job] = groupJobs(processes, members);
    expect(job!.ranks[0]!.allocated_bytes).toBe(row.pytorch!.allocated_bytes);
    expect(job!.ranks[0]!.device).toBe(row.device);
    expect(job!.allocated_bytes).toBe(doc.jobs[0]!.allocated_bytes);
    expect(job!.used_bytes).toBe(doc.jobs[0]!.used_bytes! + 500 * 1024 * 1024);
  });

  test("words: rank lists and shared commands", () => {
    expect(rankList([7, 0, 1, 2, 5, 8])).toBe("0-2, 5, 7-8");
    expect(commonCommand(["python -m torch.distributed.launch train.py --local_rank=0", "python -m torch.distributed.launch train.py --local_rank=1"])).toBe("python -m torch.distributed.launch train.py");
    expect(commonCommand(["a.py", "b.py"])).toBe("a.py");
    expect(commonCommand([null])).toBeNull();
  });
});

describe("the document's jobs", () => {
  test("satisfy the schema, through JSON, each listing its ranks' pids", () => {
    const doc = DocumentSchema.parse(JSON.parse(JSON.stringify(hostDocument(TORCHRUN))));
    expect(doc.jobs).toHaveLength(1);
    for (const job of doc.jobs) {
      expect(JobSchema.parse(job)).toEqual(job);
      expect(job.pids).toEqual(job.ranks.map((r) => r.pid));
      for (const pid of job.pids) expect(doc.processes.some((p) => p.pid === pid)).toBe(true);
    }
  });

  test("a document written before jobs and profiles existed still reads (at this version), with no jobs and no profiles", () => {
    expect("jobs" in training).toBe(false);
    const doc = DocumentSchema.parse({ ...training, version: SCHEMA_VERSION });
    expect(doc.jobs).toEqual([]);
    expect(doc.processes.filter((p) => p.pytorch).every((p) => p.pytorch!.profile === null)).toBe(true);
  });

  test("the JSON Schema describes jobs", () => {
    const schema = jsonSchema() as { properties: Record<string, { items?: { properties: Record<string, unknown>; required: string[] } }> };
    const job = schema.properties.jobs!.items!;
    expect(job.required).toEqual(expect.arrayContaining(["id", "world_size", "pids", "ranks", "missing_ranks", "step_min", "step_max", "peak_rank"]));
  });
});

describe("on this machine", () => {
  test("two ranks a shell started (as a launcher would) are one job in the sampled document, grouped by their real parent", async () => {
    const top = mkdtempSync(join(tmpdir(), "gpumem-jobs-"));
    const dir = join(top, "agents");
    mkdirSync(dir, { mode: 0o700 });
    const launcher = Bun.spawn(["sh", "-c", "sleep 30 & echo $!; sleep 30 & echo $!; wait"], { stdout: "pipe" });
    const reader = launcher.stdout.getReader();
    let out = "";
    while (out.split("\n").length < 3) {
      const { done, value } = await reader.read();
      if (done) break;
      out += new TextDecoder().decode(value);
    }
    const pids = out.trim().split("\n").map(Number);
    const machine = new Machine({ agentDir: dir });
    try {
      pids.forEach((pid, rank) => {
        produce(join(dir, `${pid}.ring`), 64, 11, "--pid", pid);
        const manifest = { version: 1, pid, cmdline: ["train.py"], rank, local_rank: rank, world_size: 2, devices: [0], hook_mode: "hook", ring: join(dir, `${pid}.ring`), socket: join(dir, `${pid}.sock`) };
        writeFileSync(join(dir, `${pid}.json`), JSON.stringify(manifest), { mode: 0o600 });
      });
      const doc = DocumentSchema.parse(machine.sample());
      expect(doc.jobs).toHaveLength(1);
      expect(doc.jobs[0]).toMatchObject({ id: `ppid:${launcher.pid}`, launcher_pid: launcher.pid, world_size: 2, pids, missing_ranks: [], name: "sleep 30", state: "running" });
      expect(doc.jobs[0]!.allocated_bytes).toBe(2 * 3072); // the producer's 11 events leave 3072 bytes live in each
      // Rank 1 exits: /proc forgets it, the monitor does not; it stays in its job, said exited.
      process.kill(pids[1]!);
      // Gone once its shell has reaped it (was 200 ms of sleep, short on a loaded machine).
      for (let i = 0; i < 500 && existsSync(`/proc/${pids[1]}`); i++) await Bun.sleep(20);
      const after = DocumentSchema.parse(machine.sample());
      expect(after.jobs).toHaveLength(1);
      expect(after.jobs[0]!.ranks.map((r) => [r.rank, r.exited])).toEqual([[0, false], [1, true]]);
      expect(after.jobs[0]!.state).toBe("incomplete");
      expect(jobNotes(after.jobs[0]!)).toContain("incomplete: rank 1 exited");
    } finally {
      machine.close();
      for (const pid of pids) {
        try {
          process.kill(pid);
        } catch {
          // already gone (rank 1 above)
        }
      }
      launcher.kill();
      rmSync(top, { recursive: true, force: true });
    }
  });
});
