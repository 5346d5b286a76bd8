// The document's `forecast` of a PyTorch process (src/profiler/forecast.ts): the peak at other
// batch sizes, the largest batch that fits, time to OOM. Apart from schema.ts, which imports it.
import { z } from "zod";

const bytes = z.number();

export const ForecastFitSchema = z
  .object({
    intercept_bytes: bytes,
    per_token_bytes: bytes.describe("per element of batch × sequence"),
    per_token_seq_bytes: bytes.describe("per element of batch × sequence², 0 where the steps show no quadratic term"),
    in_seq: z.enum(["linear", "quadratic"]).nullable().describe("how the peak grows with the sequence length, from what the steps show; null where they saw one length"),
    shapes: z.number().int().describe("distinct input shapes among the steps fitted"),
    steps: z.number().int(),
    max_error: z.number().describe("the largest |fitted − measured| / measured peak over the steps fitted"),
    rms_error: z.number(),
  })
  .describe("the peak fitted over steps of different input shapes: intercept + per_token × batch × seq + per_token_seq × batch × seq²");

export const ForecastSchema = z
  .object({
    device: z.number().int(),
    step: z.number().int().describe("the latest settled step read"),
    steps: z.number().int().describe("settled steps the forecast is from"),
    batch: z.number().int().nullable().describe("the first dimension of the outermost module's first tensor argument at the latest step; null where the agent said none (forecasts are then multiples of this batch)"),
    seq: z.number().int().nullable().describe("its second dimension (0 for a tensor of one dimension)"),
    peak_bytes: bytes.describe("the step's peak allocated"),
    fixed_bytes: bytes.describe("of the peak, what does not scale with the input: parameters, gradients, optimizer state, buffers, what earlier steps left"),
    scaling_bytes: bytes.describe("of the peak, what forward and backward made and still held (activations, temporaries, the batch), gradients aside"),
    slack_bytes: bytes.describe("reserved − allocated at the step's peak: the allocator's slack"),
    reserve_bytes: bytes.describe("of the slack, what counts beside the peak at this batch: free memory in segments holding a block at the peak (whole free segments are returned before an OOM); where a segment made for per-step blocks holds long-lived memory, its free part grows with the batch"),
    fit: ForecastFitSchema.nullable(),
    at: z.array(z.object({ batch: z.number(), peak_bytes: bytes })).describe("the peak forecast at 2× and 4× this batch"),
    room_bytes: bytes.nullable().describe("what the allocator may reserve: torch.cuda.set_per_process_memory_fraction's limit, else the device's total less what is outside PyTorch; null where unknown"),
    total_bytes: bytes.nullable(),
    outside_bytes: bytes.nullable().describe("what the GPU holds outside this process's allocator: NVML's total − free − reserved (its CUDA context and libraries, other processes, the driver's), else the process's NVML used − reserved"),
    others_bytes: bytes.nullable().describe("of outside_bytes, other processes' and the driver's (null where not told apart)"),
    limit_bytes: bytes.nullable(),
    max_batch: z.number().int().nullable().describe("the largest batch whose forecast peak and the allocator's free memory it cannot give back there fit the room (in multiples of this batch where `batch` is null); null where no room is known or the peak does not grow with the batch"),
    max_batch_bytes: bytes.nullable().describe("peak and reserve at max_batch"),
    max_batch_unstranded: z.number().int().nullable().describe("where segments made for per-step blocks hold long-lived memory at the peak: the largest batch if that memory lies elsewhere at that batch (the forecast's margin: another start can place it so); null where none does"),
    time_to_oom: z
      .object({
        growth_per_step_bytes: bytes.describe("the growth finding's"),
        steps: z.number().int(),
        seconds: z.number().nullable().describe("steps × the median step's duration"),
        oom_step: z.number().int().describe("the step whose peak is forecast not to fit"),
      })
      .nullable()
      .describe("where memory held at step boundaries grows: when the step's peak no longer fits the room"),
    basis: z.string().describe("what scales, from how many steps, in words"),
    words: z.string().describe('"batch 16x256 now, peak 4.32 GiB; fits up to batch 58 (…)"'),
  })
  .describe("will it fit: the step's peak split into what is fixed and what scales with the input, forecast for other batch sizes");
