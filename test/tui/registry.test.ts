// A screen is one file under src/tui/screens/ exporting its ScreenSpec, and one line in the
// registry (src/tui/registry.tsx). This fails when the line is forgotten: the screen's file
// exports a spec that the tabs, the help and the keys would never show.
import { expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { SCREENS } from "../../src/tui/registry";

const DIR = join(import.meta.dir, "..", "..", "src", "tui", "screens");

test("every screen a file under src/tui/screens exports is in the registry's list", async () => {
  const specs: { file: string; id: string }[] = [];
  for (const file of readdirSync(DIR).filter((f) => /\.tsx?$/.test(f))) {
    const mod = (await import(join(DIR, file))) as Record<string, unknown>;
    for (const v of Object.values(mod)) {
      const s = v as { id?: unknown; key?: unknown; title?: unknown; component?: unknown };
      if (s && typeof s === "object" && typeof s.id === "string" && typeof s.key === "string" && typeof s.title === "string" && typeof s.component === "function") specs.push({ file, id: s.id });
    }
  }
  expect(specs.length).toBeGreaterThan(0);
  const listed = new Set<string>(SCREENS.map((s) => s.id));
  expect(specs.filter((s) => !listed.has(s.id))).toEqual([]);
});
