// The forecast of a ring recorded by bench/gpu-parts/forecast.sh (test/gpu/forecast_train.py ring),
// in the room it ran in: the device's total less what was outside PyTorch, under the cap the
// program set. One definition for the acceptance test and the script that picks the batches a
// fresh process checks.
import { forecastAt, forecastBasis, type Forecast, type ForecastBasis, type ForecastRoom } from "../../src/profiler/forecast";
import { played } from "./played";

/** What forecast_train.py's ring facts say of the room. */
export interface RingRoomFacts {
  cap: { cap_bytes: number; device_total: number };
  outside_pytorch: { outside: number } | null;
}

/** The room the recording ran in: the device's total less what was outside PyTorch. */
export function ringRoom(f: RingRoomFacts): ForecastRoom {
  return { total_bytes: f.cap.device_total, outside_bytes: f.outside_pytorch?.outside ?? null };
}

/** The agent's LIMIT record says the cap; a ring from before it had none: the facts' cap then. */
export function withCap(b: ForecastBasis, f: RingRoomFacts): ForecastBasis {
  return b.limit_bytes === null ? { ...b, limit_bytes: f.cap.cap_bytes } : b;
}

/** The basis and forecast of a ring (NAME.ring or NAME.ring.gz) at its end, or null where none is made. */
export async function ringForecast(ring: string, f: RingRoomFacts): Promise<{ basis: ForecastBasis; forecast: Forecast } | null> {
  const b = forecastBasis(await played(ring));
  if (!b) return null;
  const basis = withCap(b, f);
  return { basis, forecast: forecastAt(basis, ringRoom(f)) };
}
