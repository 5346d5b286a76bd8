// What one call inside a loop costs every record (bench/results/ingest-ring-flat/README.md): the model's
// per-record work on hf-gpt2.ring written as one flat function over typed arrays (the address map, the
// block columns, the large pool's chains, the totals, the step's run sums, the pending blocks, the log
// of frees, the timeline's bucket), a cost probe, not the model: its results are not checked. With
// CUT_CALL=1 (the default) a cut's new free block is linked in by a function call (made by 9% of the
// records); with CUT_CALL=0 the cut only shortens the block, no call in the loop.
//   bun bench/results/ingest-ring-flat/one-call.ts            (LAPS, default 300; CUT_CALL)
import { join } from "node:path";
import { openRing } from "../../../src/ffi/ring";
import { newEventBatch } from "../../../src/ffi/events";
import { hash } from "../../../src/profiler/address-map";
const ring = openRing(join(import.meta.dir, "..", "..", "..", "test", "fixtures", "hf-gpt2.ring"), { fold: true, copy: true });
const CUT_CALL = process.env.CUT_CALL !== "0";
const all = newEventBatch(1 << 21) as any;
ring.read(all); ring.close();
const N = all.count;
const EMPTY = -1, DEAD = -2147483648;
class Dev {
  keys = new Float64Array(16384).fill(EMPTY); vals = new Int32Array(16384); mask = 16383;
  cAddr = new Float64Array(16384); cSize = new Float64Array(16384); cSerial = new Float64Array(16384); cTime = new Float64Array(16384); cStream = new Float64Array(16384);
  cStep = new Uint32Array(16384); cRange = new Uint32Array(16384); cPhase = new Uint8Array(16384); cCat = new Uint8Array(16384); cFlags = new Uint8Array(16384);
  cStack = new Uint32Array(16384); cUnsized = new Uint8Array(16384); cChain = new Int32Array(16384);
  names: (string | undefined)[] = new Array(16384).fill(undefined);
  freeSlots = new Int32Array(16384); nFree = 0; used = 0;
  bytesByCat = new Float64Array(8); countByCat = new Float64Array(8); bytesByRange = new Float64Array(64);
  lAddr = new Float64Array(4096); lSize = new Float64Array(4096); lKind = new Uint8Array(4096); lPrev = new Int32Array(4096); lNext = new Int32Array(4096); lSpare = new Int32Array(4096); lUnsettled = new Uint8Array(4096);
  lUsed = 0; lNSpare = 0;
  aKeys = new Float64Array(8192).fill(EMPTY); aVals = new Int32Array(8192); aMask = 8191;
  pendSlot = new Int32Array(65536); pendSerial = new Float64Array(65536); pendLen = 0;
  logSlot = new Int32Array(65536); logAt = new Float64Array(65536); logN = 0;
  liveByPhase = new Float64Array(8); liveByRange = new Float64Array(64);
  requested = 0; allocated = 0; active = 0; reserved = 0; peakAllocated = 0; peakActive = 0; serial = 0; lastTime = 0;
  counts = new Float64Array(5);
  step = -1; phase = 0; range = 0; phaseStartSerial = 0; rangeStartSerial = 0; peakAt = 0; stepPeak = 0;
  stAlloc = 0; stNAlloc = 0; stFreed = 0; stNFree = 0; stWithin = 0; stLargest = 0; stPeak = 0; peakTemp = 0;
  fineEnd = 0; nBuckets = 0;
  blockOut = new Float64Array(8192);
}
const D = new Dev();
function lAdd(d: Dev, address: number, size: number, kind: number, after: number): number {
  const s = d.lNSpare > 0 ? d.lSpare[--d.lNSpare]! : d.lUsed++;
  const next = d.lNext, prev = d.lPrev;
  d.lAddr[s] = address; d.lSize[s] = size; d.lKind[s] = kind; prev[s] = after; d.lUnsettled[s] = 0;
  const n = after === -1 ? -1 : next[after]!;
  next[s] = n; if (after !== -1) next[after] = s; if (n !== -1) prev[n] = s;
  const keys = d.aKeys, mask = d.aMask;
  let h = hash(address) & mask;
  for (;;) { const k = keys[h]!; if (k === address || k === EMPTY) { keys[h] = address; d.aVals[h] = s; break; } h = (h + 1) & mask; }
  return s;
}
function segAlloc(d: Dev, address: number, size: number) {
  const keys = d.aKeys, mask = d.aMask;
  let h = hash(address) & mask;
  for (;;) { const k = keys[h]!; if (k === address) { const s = d.aVals[h]!; if (d.lKind[s] !== 0 && d.lAddr[s] === address) return; break; } if (k === EMPTY) break; h = (h + 1) & mask; }
  lAdd(d, address, size, 1, -1);
}
function boundary(d: Dev, step: number, phase: number, range: number) {
  // phase end: resolve pending
  const cat = d.cCat;
  for (let k = 0; k < d.pendLen; k++) { const s = d.pendSlot[k]!; if (d.cSerial[s] === d.pendSerial[k] && cat[s] === 0) { cat[s] = 1 + (d.phase % 4); d.bytesByCat[0]! -= d.cSize[s]!; d.bytesByCat[1 + (d.phase % 4)]! += d.cSize[s]!; } }
  d.pendLen = 0;
  if (step !== d.step) {
    // step end: release the log
    for (let k = 0; k < d.logN; k++) { const s = d.logSlot[k]!; d.cSerial[s] = -1; d.freeSlots[d.nFree++] = s; }
    d.logN = 0; d.liveByPhase.fill(0); d.liveByRange.fill(0); d.stepPeak = d.allocated; d.peakAt = d.serial;
  }
  d.step = step; d.phase = phase; d.range = range; d.phaseStartSerial = d.serial; d.rangeStartSerial = d.serial;
}
function run(d: Dev, b: any, from: number, end: number): number {
  const action = b.action, deviceCol = b.device, time = b.time_us, address = b.address, sizeCol = b.size, streamCol = b.stream, stepCol = b.step, phaseCol = b.phase, rangeCol = b.range, stackCol = b.stack, extra = b.extra, lineCol = b.line;
  const cs = d.step, cp = d.phase, cr = d.range;
  const step = cs, phase = cp, range = cr;
  let { keys: mKeys, vals: mVals, mask: mMask } = d;
  const { cAddr, cSize, cSerial, cTime, cStream, cStep, cRange, cPhase, cCat, cFlags, cStack, cUnsized, cChain, names, freeSlots, bytesByCat, countByCat, bytesByRange, lAddr, lSize, lKind, lPrev, lNext, lSpare, lUnsettled, aKeys, aVals, aMask, pendSlot, pendSerial, logSlot, logAt, liveByPhase, liveByRange, counts, blockOut } = d;
  let nFree = d.nFree, lNSpare = d.lNSpare, pendLen = d.pendLen, logN = d.logN;
  let requested = d.requested, allocated = d.allocated, active = d.active, reserved = d.reserved, peakAllocated = d.peakAllocated, peakActive = d.peakActive, serial = d.serial, lastTime = d.lastTime;
  let runAlloc = 0, runNAlloc = 0, runLargest = 0, runPeak = -1, runFreed = 0, runNFree = 0, runWithin = 0, runRangeWithin = 0, runLive = 0;
  const phaseStartSerial = d.phaseStartSerial, rangeStartSerial = d.rangeStartSerial;
  let peakAt = d.peakAt, stepPeak = d.stepPeak, peakTemp = d.peakTemp;
  let fineEnd = d.fineEnd, aMin = Infinity, aMax = -Infinity, lastA = 0;
  let i = from;
  for (; i < end; i++) {
    const a = action[i]!;
    if (i > from) {
      if ((a > 2 && a !== 15) || deviceCol[i] !== 0) break;
      const st = stepCol[i]!; const rg = rangeCol[i]!;
      if (rg >= 65536 || ((st !== cs || phaseCol[i] !== cp || rg !== cr) && st >= cs)) break;
    }
    const t = time[i]!;
    const rq = sizeCol[i]!;
    const rounded = rq <= 0 ? 0 : Math.ceil(rq / 512) * 512;
    const addr = address[i]!;
    if (a === 0) {
      const ser = ++serial;
      const slot = nFree > 0 ? freeSlots[--nFree]! : d.used++;
      const hh = hash(addr);
      let h = hh & mMask;
      for (;;) { const k = mKeys[h]!; if (k === addr) { const o = mVals[h]!; if (o !== DEAD) { allocated -= cSize[o]!; active -= cSize[o]!; bytesByCat[cCat[o]!]! -= cSize[o]!; freeSlots[nFree++] = o; } mVals[h] = slot; break; } if (k === EMPTY) { mKeys[h] = addr; mVals[h] = slot; break; } h = (h + 1) & mMask; }
      let size = rounded, chain = -1;
      if (rounded > 1048576) {
        let c = -1;
        for (let g = hh & aMask; ; g = (g + 1) & aMask) { const k = aKeys[g]!; if (k === addr) { const v = aVals[g]!; if (lKind[v] === 1 && lAddr[v] === addr) c = v; break; } if (k === EMPTY) break; }
        const f = c >= 0 ? lSize[c]! : 0;
        if (f >= rounded) {
          lKind[c] = 2; chain = c;
          if (f - rounded > 1048576) { lSize[c] = rounded; if (CUT_CALL) { d.lNSpare = lNSpare; lAdd(d, addr + rounded, f - rounded, 1, c); lNSpare = d.lNSpare; } } else size = f;
        } else { cUnsized[slot] = 1; }
      }
      cChain[slot] = chain; cAddr[slot] = addr; cSize[slot] = size; blockOut[i & 8191] = size;
      cStream[slot] = streamCol[i]!; cTime[slot] = t; cSerial[slot] = ser; cStep[slot] = step; cRange[slot] = range; cPhase[slot] = phase; cCat[slot] = 0; cFlags[slot] = 0;
      cStack[slot] = stackCol[i]! || extra[i]!;
      bytesByCat[0]! += size; countByCat[0]!++; bytesByRange[range]! += size;
      pendSlot[pendLen] = slot; pendSerial[pendLen++] = ser;
      requested += rq; allocated += size; active += size;
      if (allocated > peakAllocated) peakAllocated = allocated;
      if (active > peakActive) peakActive = active;
      counts[0]!++;
      runLive += size; runAlloc += size; runNAlloc++; if (size > runLargest) runLargest = size;
      if (allocated > runPeak) { runPeak = allocated; if (allocated > stepPeak) { stepPeak = allocated; peakAt = ser; peakTemp = 0; } }
      lastTime = t;
    } else {
      let slot = -1;
      for (let h = hash(addr) & mMask; ; h = (h + 1) & mMask) { const k = mKeys[h]!; if (k === addr) { const v = mVals[h]!; if (v !== DEAD) { slot = v; mVals[h] = DEAD; } break; } if (k === EMPTY) break; }
      const size = slot >= 0 ? cSize[slot]! : rounded;
      blockOut[i & 8191] = size;
      const chain = slot >= 0 ? cChain[slot]! : -1;
      requested -= rq; allocated -= size; active -= size; counts[1]!++;
      if (slot >= 0) {
        const born = cSerial[slot]!;
        const logged = born <= peakAt;
        runFreed += size; runNFree++;
        if (born > phaseStartSerial) { runWithin += size; if (cCat[slot] === 0 && born <= peakAt) peakTemp += size; }
        if (born > rangeStartSerial) runRangeWithin += size;
        if (cStep[slot] === step) { liveByPhase[cPhase[slot]!]! -= size; liveByRange[cRange[slot]!]! -= size; }
        const cat = cCat[slot]!;
        bytesByCat[cat]! -= size; countByCat[cat]!--; bytesByRange[cRange[slot]!]! -= size;
        if (cUnsized[slot] === 1) cUnsized[slot] = 0;
        if (logged) { if (cat === 0) cCat[slot] = 6; logSlot[logN] = slot; logAt[logN++] = serial; }
        else { if (names[slot] !== undefined) names[slot] = undefined; cFlags[slot] = 0; cSerial[slot] = -1; freeSlots[nFree++] = slot; }
      } else { runFreed += size; runNFree++; }
      if (a === 15 && rounded > 1048576 && chain >= 0 && lKind[chain] === 2 && lAddr[chain] === addr) {
        const n = lNext[chain]!; const p = lPrev[chain]!;
        if ((n < 0 || lKind[n] !== 3) && lUnsettled[chain] === 0) {
          lKind[chain] = 1;
          if (n >= 0 && lKind[n] === 1) { lSize[chain]! += lSize[n]!; const nn = lNext[n]!; lNext[chain] = nn; if (nn >= 0) lPrev[nn] = chain; lKind[n] = 0; lSpare[lNSpare++] = n; }
          if (p >= 0 && lKind[p] === 1) { lSize[p]! += lSize[chain]!; const nn = lNext[chain]!; lNext[p] = nn; if (nn >= 0) lPrev[nn] = p; lKind[chain] = 0; lSpare[lNSpare++] = chain; }
        }
      }
      lastTime = a === 15 ? extra[i]! : t;
    }
    if (t < fineEnd) { if (allocated < aMin) aMin = allocated; if (allocated > aMax) aMax = allocated; lastA = allocated; }
    else { fineEnd = t + 1000; d.nBuckets++; aMin = Infinity; aMax = -Infinity; }
    if (lineCol[i] !== 0) { i++; break; }
  }
  d.nFree = nFree; d.lNSpare = lNSpare; d.pendLen = pendLen; d.logN = logN;
  d.requested = requested; d.allocated = allocated; d.active = active; d.peakAllocated = peakAllocated; d.peakActive = peakActive; d.serial = serial; d.lastTime = lastTime;
  d.stAlloc += runAlloc; d.stNAlloc += runNAlloc; d.stFreed += runFreed; d.stNFree += runNFree; d.stWithin += runWithin + runRangeWithin; if (runLargest > d.stLargest) d.stLargest = runLargest; if (runPeak > d.stPeak) d.stPeak = runPeak;
  liveByPhase[phase]! += runLive; liveByRange[range]! += runLive;
  d.peakAt = peakAt; d.stepPeak = stepPeak; d.peakTemp = peakTemp; d.fineEnd = fineEnd;
  return i;
}
function ingest(d: Dev, b: any, from: number, end: number, k: number, maxStep: number) {
  for (let i = from; i < end; i++) {
    const a = b.action[i]!;
    if (a === 3) { segAlloc(d, b.address[i]!, b.size[i]!); continue; }
    if (a > 2 && a !== 15) continue;
    const st = b.step[i]! + k * (maxStep + 1), ph = b.phase[i]!, rg = b.range[i]!;
    if (st !== d.step || ph !== d.phase || rg !== d.range) boundary(d, st, ph, rg);
    i = run(d, b, i, end) - 1;
  }
}
let maxStep = 0; for (let i = 0; i < N; i++) maxStep = Math.max(maxStep, all.step[i]);
const chunk = newEventBatch(8192) as any;
const cols = Object.keys(all).filter((k) => typeof all[k] !== "number");
const LAPS = Number(process.env.LAPS ?? 300);
const times: number[] = [];
for (let k = 0; k < LAPS; k++) {
  let ms = 0;
  for (let from = 0; from < N; from += 8192) {
    const n = Math.min(8192, N - from);
    for (const c of cols) chunk[c].set(all[c].subarray(from, from + n));
    for (let i = 0; i < n; i++) chunk.step[i] = all.step[from + i] + k * (maxStep + 1);
    const t = performance.now();
    ingest(D, chunk, 0, n, 0, 0);
    ms += performance.now() - t;
  }
  times.push(ms * 1e6 / N);
}
const st = times.slice(100).sort((a, b) => a - b);
console.log(JSON.stringify({ cut_call: CUT_CALL, ns_per_record_median: +st[st.length >> 1]!.toFixed(1) }));
