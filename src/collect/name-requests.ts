// Names without asking: the monitor asks each agent for its tensors' names (the `names` verb,
// docs/protocol.md) when the agent appears, after its first optimizer step, and at most once every
// ASK_EVERY_MS when large unnamed blocks appear or records were lost (names fill blocks back in);
// the reader (live.ts) applies a reply at the reply's write index, between a batch's records, so
// names meet the blocks they were taken from and not a tensor made at a freed address after. A
// program started by `run` also leaves the names it held at exit in its final manifest
// (`final_names`): applied the same way, so a run too short for a reply ends named.
import { unnamedBytes, type NamedTensor, type ProfilerModel } from "../profiler";
import { answerOf, command, type Send } from "./control";
import type { ArgsOf } from "./protocol";

/** The shortest time between two requests for unnamed blocks (the walk holds the agent's GIL: ms). */
export const ASK_EVERY_MS = 10_000;
/** Unnamed long-lived bytes (blocks of 1 MiB or more) that are worth a request. */
export const UNNAMED_BYTES_TO_ASK = 16 * 1024 * 1024;

/** What the views show of the names: how many, from when, and what they cost. */
export interface NamesStatus {
  requests: number;
  /** Why the last request was made, in words. */
  reason: string | null;
  /** The agent's step when it answered. */
  step: number | null;
  tensors: number;
  matched: number;
  added: number;
  /** Time the agent spent walking its models and optimizers, and the whole round trip. */
  agent_ms: number | null;
  round_trip_ms: number | null;
  at_ms: number | null;
  error: string | null;
  /** Replies that came after the reader had passed their point, dropped and asked again. */
  late?: number;
}


/** The names an agent took at exit (its final manifest's `final_names`): a `names` reply. */
export interface ExitNames {
  tensors: NamedTensor[];
  write_index: number;
  step?: number | null;
}

export class NameRequests {
  readonly status: NamesStatus = { requests: 0, reason: null, step: null, tensors: 0, matched: 0, added: 0, agent_ms: null, round_trip_ms: null, at_ms: null, error: null };
  private inflight = false;
  private pending: { tensors: NamedTensor[]; writeIndex: number } | null = null;
  /** The names at exit, until applied; `exitSeen` once they came (they come once). */
  private atExit: { tensors: NamedTensor[]; writeIndex: number } | null = null;
  private exitSeen = false;
  private lastAskMs = -Infinity;
  private lastWalkMs = -Infinity;
  private askedAfterFirstStep = false;
  /** Records lost when the last request went: more since (the ring lapped) is worth a resync. */
  private lostAtAsk = 0;

  constructor(private readonly ask: Send = command) {}

  /** Decide whether to ask now (never two at once); the reply lands as pending names. */
  askIfDue(socket: string | null, model: ProfilerModel, nowMs: number): void {
    if (!socket || this.inflight) return;
    let reason: string | null = null;
    const step = model.devices.reduce((s, d) => Math.max(s, d.step), 0);
    if (this.status.requests === 0) reason = "the agent appeared";
    else if (step >= 1 && !this.askedAfterFirstStep) reason = "after the first optimizer step";
    else if (model.lostRecords > this.lostAtAsk && nowMs - this.lastAskMs >= ASK_EVERY_MS) reason = "records were lost: names fill the blocks back in";
    else if (nowMs - this.lastAskMs >= ASK_EVERY_MS && nowMs - this.lastWalkMs >= ASK_EVERY_MS) {
      // The walk over every block, too, at most once a period (not every tick under the bar).
      this.lastWalkMs = nowMs;
      const unnamed = unnamedBytes(model);
      if (unnamed >= UNNAMED_BYTES_TO_ASK) reason = `${Math.round(unnamed / 2 ** 20)} MiB in unnamed blocks`;
    }
    if (reason === null) return;
    if (step >= 1) this.askedAfterFirstStep = true;
    this.lostAtAsk = model.lostRecords;
    this.lastAskMs = nowMs;
    this.inflight = true;
    this.status.requests++;
    this.status.reason = reason;
    const t0 = performance.now();
    // at_step: the agent walks its models right after the next optimizer step, where gradients
    // and optimizer state are alive (at a random moment a gradient is often None).
    this.ask(socket, "names", { at_step: true } satisfies ArgsOf<"names">)
      .then((raw) => answerOf("names", raw))
      .then((a) => {
        if (this.exitSeen) return; // the agent closed its socket at exit: its names at exit stand
        if (!a.ok) {
          this.status.error = a.error;
          return;
        }
        const r = a.reply;
        this.status.error = null;
        this.status.round_trip_ms = Math.round((performance.now() - t0) * 10) / 10;
        this.status.agent_ms = r.scan_ms;
        this.status.step = r.step;
        this.pending = { tensors: r.tensors, writeIndex: r.write_index };
      })
      .finally(() => (this.inflight = false));
  }

  /** The names the agent took at exit, from its final manifest: taken once, applied like a reply
   *  once the reader reaches their index. */
  exitNames(names: ExitNames): void {
    if (this.exitSeen) return;
    this.exitSeen = true;
    this.atExit = { tensors: names.tensors, writeIndex: names.write_index };
    this.status.reason = "the agent's names at exit";
    this.status.step = names.step ?? this.status.step;
  }

  /** The ring index the pending reply's names were taken at, or null. The reader feeds the model
   *  up to exactly there, applies the names, then goes on: a moment later a tensor's block may be
   *  freed (zero_grad) and its address handed to another tensor, which the names must not touch. */
  pendingAt(): number | null {
    const at = [this.pending?.writeIndex, this.atExit?.writeIndex].filter((i) => i !== undefined);
    return at.length ? Math.min(...at) : null;
  }

  /** A reply the reader had already read past when it came (a walk that took long): its names
   *  cannot be tied to the blocks of their moment. Dropped, and asked for again at once. */
  late(readerNext: number): boolean {
    const p = this.pending;
    if (!p || readerNext <= p.writeIndex) return false;
    this.pending = null;
    this.status.late = (this.status.late ?? 0) + 1;
    this.lastAskMs = -Infinity;
    this.lastWalkMs = -Infinity;
    return true;
  }

  /** Apply a reply, and the names at exit, once the ring has been read up to their write index
   *  (`readerNext`). The names at exit are never late: nothing is allocated after them (the hook
   *  is detached), so a reader already past their index applies them at once. */
  apply(model: ProfilerModel, readerNext: number, nowMs: number): boolean {
    let applied = false;
    const p = this.pending;
    if (p && readerNext >= p.writeIndex) {
      this.pending = null;
      this.set(model, p.tensors, nowMs);
      applied = true;
    }
    const e = this.atExit;
    if (e && readerNext >= e.writeIndex) {
      this.atExit = null;
      this.status.error = null;
      this.set(model, e.tensors, nowMs);
      applied = true;
    }
    return applied;
  }

  private set(model: ProfilerModel, tensors: NamedTensor[], nowMs: number): void {
    try {
      const r = model.setNames(tensors);
      Object.assign(this.status, { tensors: tensors.length, matched: r.matched, added: r.added, at_ms: nowMs });
    } catch (e) {
      this.status.error = `the agent's names could not be applied: ${(e as Error).message}`;
    }
  }
}
