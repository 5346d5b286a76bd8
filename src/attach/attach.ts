// `gpumem-tui attach PID`, without the command line: preflight, token, the helper, and the wait for
// the bootstrap to claim the attach at a safe point (docs/protocol.md, "Attaching to a running
// process"). A target that reaches no safe point in time is left as it was: the token is withdrawn,
// so the bootstrap still queued in it does nothing when it finally runs.
import { pidAlive, pidEnding, startTicks } from "../collect/procfs";
import { pageText, payload, scriptText } from "./bootstrap";
import { HELPER_EXIT, runHelper, usesRemoteExec } from "./helper";
import { alreadyAttached, checkProcess, checkTorch, checkYama, lostProcess, noSuchProcess, notPython, notSameProcess, ptraceContext, type Check } from "./preflight";
import { createScript, createToken, findManifest, removeScript, scriptPath, takeAgentError, tokenClaimed, tokenDir, withdrawToken } from "./token";

export interface AttachOptions {
  /** Seconds to wait for a safe point (and, with wait, for torch and CUDA). */
  timeoutS: number;
  /** Wait for torch to be imported and CUDA initialized instead of refusing. */
  wait: boolean;
  /** Seconds to wait for the agent's manifest once the bootstrap ran (the hook may compile). */
  agentWaitS?: number;
  env?: NodeJS.ProcessEnv;
  /** Said while waiting (for torch, for the agent). */
  say?: (line: string) => void;
  /** This process is a monitor that owns the attach (the screens of the `attach` verb, the `a`
   *  key): the agent detaches when it exits. Off (`--no-monitor`): the agent stays until `detach`
   *  or the program's exit. */
  owned?: boolean;
  /** Test-only: the thread that makes the calls (cuda/inject.c --call-tid). */
  callTid?: number;
}

export type AttachResult =
  | { ok: true; pid: number; line: string; python: string; stoppedUs: number; manifest: string | null }
  | { ok: false; pid: number; line: string };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function refuse(pid: number, reason: string): AttachResult {
  return { ok: false, pid, line: `attach ${pid} refused: ${reason}` };
}

/** How long a failed helper's target is watched for its exit: a program finalizing its interpreter
 *  (after sys.exit) is not yet exiting for the kernel, and a call into it may fault. */
const EXIT_GRACE_MS = 300;

/** Whether the process is ending now or within the grace: a failure then was that exit. */
async function endingSoon(pid: number): Promise<boolean> {
  for (const until = Date.now() + EXIT_GRACE_MS; ; await sleep(10)) {
    if (pidEnding(pid)) return true;
    if (Date.now() >= until) return false;
  }
}

/** What the helper's exit status means, in the preflight's words. A process that began to exit
 *  while the helper read or stopped it fails in many ways (its maps gone, a call faulting, ptrace
 *  answering ESRCH): all of them are that exit, said as such. */
async function helperRefusal(pid: number, start: number | null, code: number, error: string): Promise<string> {
  // The helper's own check (--start-time), or a step failing its own way (not CPython, maps
  // unreadable) on a pid given to another process since: said as what it is.
  if (code === HELPER_EXIT.notSame || lostProcess(pid, start) === "reused") return notSameProcess(pid);
  if (code === HELPER_EXIT.exited || (await endingSoon(pid))) return `process ${pid} exited during the attach`;
  if (code === HELPER_EXIT.noProcess) return noSuchProcess(pid, false);
  if (code === HELPER_EXIT.notPython) return notPython(pid, error.replace(/^process \d+ is not a CPython process \((.*)\)$/, "$1"));
  if (code === HELPER_EXIT.ptrace) return ptraceContext(pid, error);
  return error || `the helper failed (status ${code})`;
}

/** Why the process asked for is not there any more, `when` said after "exited"; null where it is
 *  (the same pid and start time, not a zombie). */
function gone(pid: number, start: number | null, when = ""): string | null {
  const lost = lostProcess(pid, start);
  if (lost === "reused") return notSameProcess(pid);
  return lost === "exited" || !pidAlive(pid) ? `process ${pid} exited${when && ` ${when}`}` : null;
}

export async function attachProcess(pid: number, opts: AttachOptions): Promise<AttachResult> {
  const env = opts.env ?? process.env;
  const say = opts.say ?? (() => {});
  // The process asked for is this pid with this start time: a pid given to a later process since
  // (the first exited) is not it, checked before each step that acts on the pid.
  const start = startTicks(pid);
  const first = checkProcess(pid);
  if (!first.ok) return refuse(pid, first.reason);
  const existing = findManifest(pid, env);
  if (existing) return refuse(pid, alreadyAttached(pid, existing));
  const yama = checkYama(pid);
  if (!yama.ok) return refuse(pid, yama.reason);
  const before = gone(pid, start, "before the attach");
  if (before) return refuse(pid, before);
  // The helper acts only on the process with this start time, checked once it holds the pid
  // (cuda/inject_threads.c stop_all_or_die) or, for the probe, once it read it: that closes the
  // window between the checks here and its PTRACE_SEIZE.
  const asked = start === null ? [] : ["--start-time", String(start)];
  const probe = await runHelper(["probe", String(pid), ...asked]);
  if (probe.code !== 0) return refuse(pid, await helperRefusal(pid, start, probe.code, probe.error));
  const python = probe.fields.python ?? "?";
  let torch: Check = checkTorch(pid, env);
  if (!torch.ok && torch.waitable && opts.wait) {
    say(`waiting for process ${pid}: ${torch.reason.split(":")[0]}`);
    while (!torch.ok && torch.waitable) {
      await sleep(1000);
      const lost = gone(pid, start, "while attach waited for it");
      if (lost) return refuse(pid, lost);
      // What may change while it waits (an exec into a setuid program, a tracer come since) is said
      // as itself, not as the torch check's failure to read the maps.
      const still = checkProcess(pid);
      if (!still.ok) return refuse(pid, still.reason);
      torch = checkTorch(pid, env);
    }
  }
  if (!torch.ok) return refuse(pid, torch.reason);

  const dir = tokenDir(env);
  if ("error" in dir) return refuse(pid, dir.error);
  if (dir.note) say(dir.note);
  // Checked again right before anything is written: the wait may have been long, and an exec keeps
  // the pid and its start time but may have made it setuid, traced, or another namespace's.
  const again = checkProcess(pid);
  const last = gone(pid, start, "before the attach") ?? (again.ok ? null : again.reason);
  if (last) return refuse(pid, last);
  const token = createToken(dir.dir, pid, Date.now() + opts.timeoutS * 1000);
  const target = payload(env);
  const monitor = opts.owned ? { pid: process.pid, start: startTicks("self") } : null;
  const boot = { token: token.path, secret: token.secret, path: target.path, module: target.module, monitor };
  // 3.14+: PEP 768, a script file the interpreter runs (it removes the file itself; a target that
  // exits first leaves it to us). Older: a pending call with the text in a page of its own.
  const script = usesRemoteExec(python) ? scriptPath(token) : null;
  let inj;
  if (script) {
    createScript(script, scriptText(boot, script));
    inj = await runHelper(["remote-exec", String(pid), script, ...asked]);
  } else {
    const args = ["inject", String(pid), "/dev/stdin", "--timeout-ms", String(Math.min(2000, Math.max(100, opts.timeoutS * 1000))), ...asked];
    if (opts.callTid) args.push("--call-tid", String(opts.callTid));
    inj = await runHelper(args, pageText(boot));
  }
  if (inj.code !== 0) {
    withdrawToken(token);
    if (script) removeScript(script);
    return refuse(pid, await helperRefusal(pid, start, inj.code, inj.error));
  }
  const stoppedUs = Number(inj.fields.stopped_us ?? NaN);
  const stopped = `its threads were stopped ${(stoppedUs / 1000).toFixed(1)} ms`;

  // The bootstrap runs at the main thread's next safe point: it claims the token by removing it.
  while (!tokenClaimed(token)) {
    const dead = gone(pid, start) !== null;
    if (dead || Date.now() >= token.deadlineMs) {
      if (withdrawToken(token)) {
        if (dead) {
          if (script) removeScript(script);
          return { ok: false, pid, line: `attach ${pid}: the process exited before it reached a safe point` };
        }
        return {
          ok: false,
          pid,
          line: `attach ${pid}: no safe point within ${opts.timeoutS} s (its main thread is in a long call that holds the interpreter, or blocked outside Python); it was left as it was (${stopped}); try again later`,
        };
      }
      break; // claimed at the last moment
    }
    await sleep(5);
  }

  // Claimed: the agent starts on its own thread; its manifest says it is there.
  const until = Date.now() + (opts.agentWaitS ?? 30) * 1000;
  let said = false;
  for (;;) {
    const error = takeAgentError(token);
    if (error) return { ok: false, pid, line: `attach ${pid}: the agent did not start: ${error}` };
    const manifest = findManifest(pid, env);
    if (manifest) {
      // Steps count from the attach (the agent cannot know the program's own count): said once here.
      return { ok: true, pid, python, stoppedUs, manifest, line: `attached to process ${pid} (Python ${python}); steps count from here; ${stopped}` };
    }
    if (gone(pid, start) !== null) return { ok: false, pid, line: `attach ${pid}: the process exited while its agent started` };
    if (Date.now() >= until) return { ok: true, pid, python, stoppedUs, manifest: null, line: `attach ${pid}: the bootstrap ran (${stopped}), but no agent appeared within ${opts.agentWaitS ?? 30} s` };
    if (!said && Date.now() > until - (opts.agentWaitS ?? 30) * 1000 + 2000) {
      say(`process ${pid}: the agent is starting (building its hook may take a while the first time)`);
      said = true;
    }
    await sleep(20);
  }
}
