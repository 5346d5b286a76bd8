// The Process screen's line of what is outside PyTorch: the ledger's rows outside torch's reserved
// (the CUDA context, each library by its marks, unexplained), in words, from the model's own NVML
// sample and figures, so it sums with the headline's allocated, reserved and NVML.
import type { DeviceSummary, ProfilerModel } from "../../profiler";
import type { PrivatePool } from "../../profiler/pools";
import { ledgerRows, ledgerWords } from "../../system/ledger-rows";

/** "812.00 MiB outside PyTorch: CUDA context 522.00 MiB, NCCL 2.40 GiB (3 communicators),
 *  unexplained 290.00 MiB"; null where NVML has no figure of the process. */
export function outsideLine(m: ProfilerModel, s: DeviceSummary, pools: readonly PrivatePool[] | null): string | null {
  if (s.nvml_used_bytes === null) return null;
  const l = ledgerRows({
    nvml_used_bytes: s.nvml_used_bytes,
    allocated_bytes: s.allocated_bytes,
    reserved_bytes: s.reserved_bytes,
    private_pools: pools ?? [],
    parts: m.ledger.parts(s.device),
  });
  return ledgerWords(l);
}
