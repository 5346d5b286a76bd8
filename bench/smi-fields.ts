// The nvidia-smi fields that match what `gpumem-tui --json --once` reports of a device: the start
// comparisons run `nvidia-smi --query-gpu=<these> --format=csv` beside it (bench/nvml.ts,
// bench/start-compare.ts).
export const SMI_FIELDS =
  "index,name,uuid,pci.bus_id,memory.total,memory.used,memory.free,memory.reserved,utilization.gpu,utilization.memory," +
  "utilization.encoder,utilization.decoder,temperature.gpu,power.draw,power.limit,fan.speed,clocks.sm,clocks.max.sm," +
  "clocks.mem,clocks.max.mem,clocks.gr,pstate";
