// The model's per-record loop gives the answers it gave before it was rewritten as one flat loop:
// on every committed ring, fed in big batches and one record at a time, every query the documents
// and screens read (test/support/model-documents.ts) at four points of the stream equals, byte for
// byte as JSON, what the tree before gave (test/profiler/fixtures/model-documents/, written by
// its write.ts from 2803dcd, main before the loop was merged).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as profiler from "../../src/profiler";
import * as recording from "../../src/collect/recording";
import * as events from "../../src/ffi/events";
import * as manifest from "../../src/system/manifest";
import { ROOT } from "../../src/ffi/build";
import { documentsOf, ringPaths, type TreeModules } from "../support/model-documents";

const mods: TreeModules = { profiler, recording, events, manifest };
const DIR = join(import.meta.dir, "fixtures", "model-documents");

describe("the model's answers on every committed ring equal the tree before the flat loop's", () => {
  for (const [name, path] of ringPaths(ROOT)) {
    const want = new TextDecoder().decode(Bun.gunzipSync(readFileSync(join(DIR, `${name}.json.gz`))));
    for (const one of [false, true]) {
      test(`${name}, ${one ? "a record at a time" : "in big batches"}`, () => {
        const got = `${JSON.stringify(documentsOf(mods, path, one))}\n`;
        if (got === want) return;
        // the first moment and query that differ, for the message
        const g = JSON.parse(got) as Record<string, unknown>[];
        const w = JSON.parse(want) as Record<string, unknown>[];
        for (let k = 0; k < w.length; k++) for (const key of Object.keys(w[k]!)) expect(g[k]?.[key], `${name} at point ${k}: ${key}`).toEqual(w[k]![key]);
        expect(got).toBe(want);
      });
    }
  }
});
