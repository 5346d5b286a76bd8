// The Process screen's line of what is outside PyTorch: the ledger's rows outside torch's reserved
// (the CUDA context, each library by its marks, unexplained), in words, from the model's own NVML
// sample and figures, so it sums with the headline's allocated, reserved and NVML. Fitted to the
// screen's width without ever losing the unexplained figure (the "always shown").
import type { DeviceSummary, ProfilerModel } from "../../profiler";
import type { PrivatePool } from "../../profiler/pools";
import { CONTEXT_LATE_NAME, ledgerRows, ledgerWords, outsideRows, unexplainedWords, type Ledger } from "../../system/ledger-rows";
import { formatBytes, textWidth } from "../format";

/** The ledger at the model's own NVML sample; null where NVML has no figure of the process. */
export function outsideLedger(m: ProfilerModel, s: DeviceSummary, pools: readonly PrivatePool[] | null): Ledger | null {
  if (s.nvml_used_bytes === null) return null;
  return ledgerRows({
    nvml_used_bytes: s.nvml_used_bytes,
    allocated_bytes: s.allocated_bytes,
    reserved_bytes: s.reserved_bytes,
    private_pools: pools ?? [],
    parts: m.ledger.parts(s.device),
  });
}

/**
 * The ledger in words within `width` columns: the document's words where they fit ("812.00 MiB
 * outside PyTorch: CUDA context 522.00 MiB, NCCL 2.40 GiB (3 communicators), unexplained 290.00
 * MiB"); else the rows under short names (a context first seen late: "context+earlier"); else the
 * smallest rows folded into "N more" before the unexplained figure, which always stays.
 */
export function outsideWords(l: Ledger, width: number): string {
  const long = ledgerWords(l);
  if (textWidth(long) <= width) return long;
  const rows = outsideRows(l);
  const shortName = (r: Ledger["rows"][number]) => (r.kind === "context" ? (r.name === CONTEXT_LATE_NAME ? "context+earlier" : "context") : r.name);
  const un = unexplainedWords(l);
  const head = `${formatBytes(l.outside_pytorch_bytes)} outside PyTorch: `;
  for (let kept = rows.length; kept >= 0; kept--) {
    const parts = rows.slice(0, kept).map((r) => `${shortName(r)} ${formatBytes(r.bytes)}`);
    const rest = rows.length - kept;
    if (rest > 0) parts.push(`${rest} more ${formatBytes(rows.slice(kept).reduce((a, r) => a + r.bytes, 0))}`);
    const line = head + [...parts, un].join(", ");
    if (textWidth(line) <= width) return line;
  }
  return `${formatBytes(l.outside_pytorch_bytes)} outside; ${un}`;
}
