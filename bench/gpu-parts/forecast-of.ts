// The forecast's largest batch for each ring forecast.sh recorded, so that the sweep and fresh
// processes check the batches it names (and one more):
//   bun bench/gpu-parts/forecast-of.ts RINGS_DIR NAME...   →  one JSON object on stdout,
//   {NAME: {max_batch, max_batch_unstranded, batch, peak_bytes, reserve_bytes}} (null: no forecast).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ringForecast } from "../../test/support/forecast-facts";

const [dir, ...names] = process.argv.slice(2);
if (!dir || names.length === 0) {
  console.error("usage: bun bench/gpu-parts/forecast-of.ts RINGS_DIR NAME...");
  process.exit(2);
}
const out: Record<string, unknown> = {};
for (const name of names) {
  const ring = [join(dir, `${name}.ring`), join(dir, `${name}.ring.gz`)].find(existsSync);
  const factsPath = join(dir, `${name}.facts.json`);
  if (!ring || !existsSync(factsPath)) {
    out[name] = null;
    console.error(`forecast-of: ${name}: no ring or facts in ${dir}`);
    continue;
  }
  try {
    const r = await ringForecast(ring, JSON.parse(readFileSync(factsPath, "utf8")));
    out[name] = r && { max_batch: r.forecast.max_batch, max_batch_unstranded: r.forecast.max_batch_unstranded, batch: r.forecast.batch, peak_bytes: r.forecast.peak_bytes, reserve_bytes: r.forecast.reserve_bytes };
  } catch (e) {
    out[name] = null;
    console.error(`forecast-of: ${name}: ${(e as Error).message}`);
  }
}
console.log(JSON.stringify(out));
