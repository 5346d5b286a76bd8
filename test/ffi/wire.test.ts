// The wire contract, once: cuda/gpumem_ring.h is the one definition, src/ffi/wire.ts and
// agent/gpumem_agent/wire.py are generated from it. These tests fail when a generated file is stale,
// and hold every value of both (defines, enum codes, field offsets, struct sizes) to what the C and
// C++ compilers make of the header itself.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { HEADER_PATH, staleWireFiles } from "../../cuda/gen-wire";
import { parseHeader, type WireSpec } from "../../cuda/wire-header";
import { ROOT, NATIVE_DIR } from "../../src/ffi/build";
import * as wire from "../../src/ffi/wire";
import { tmpPath } from "../support/native";

const spec = parseHeader(await Bun.file(HEADER_PATH).text());
type Values = Record<string, string>;

/** A C program that prints every define, enum code, struct size and field offset, one "key value" a line. */
function probeSource(s: WireSpec): string {
  const lines = ['#include "gpumem_ring.h"', "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"];
  const put = (key: string, expr: string) => lines.push(`  printf("%s %llu\\n", "${key}", (unsigned long long)(${expr}));`);
  for (const d of s.defines) put(d.name, `GPUMEM_${d.name}`);
  for (const e of s.enums) for (const m of e.members) put(`${e.name}.${m.name}`, m.cName);
  for (const st of s.structs) {
    put(`${st.name}_SIZEOF`, `sizeof(${st.cName})`);
    for (const f of st.fields) put(`${st.name}_OFFSET.${f.name}`, `offsetof(${st.cName}, ${f.name})`);
  }
  lines.push("  return 0;", "}");
  return `${lines.join("\n")}\n`;
}

/** What the compiler says: built as C11 with cc and as C++17 with c++ (the hook's language). */
function compiled(lang: "c" | "c++"): Values {
  const src = tmpPath(`wire-probe.${lang === "c" ? "c" : "cpp"}`);
  const bin = tmpPath(`wire-probe-${lang}`);
  writeFileSync(src, probeSource(spec));
  const cmd = lang === "c" ? ["cc", "-std=c11"] : ["c++", "-std=c++17"];
  const build = Bun.spawnSync([...cmd, "-Wall", "-I", NATIVE_DIR, src, "-o", bin], { stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`compiling the wire probe as ${lang} failed:\n${build.stderr}`);
  const out = Bun.spawnSync([bin]).stdout.toString();
  return Object.fromEntries(out.trim().split("\n").map((l) => l.split(" ") as [string, string]));
}

/** The same keys as the probe's, from a module's exports (offsets of padding are not exported). */
function valuesOf(mod: Record<string, unknown>): Values {
  const out: Values = {};
  const get = (name: string) => {
    if (!(name in mod)) throw new Error(`the generated module lacks ${name}`);
    return mod[name] as Record<string, number | string>;
  };
  for (const d of spec.defines) out[d.name] = String(mod[d.name]);
  for (const e of spec.enums) for (const m of e.members) out[`${e.name}.${m.name}`] = String(get(e.name)[m.name]);
  for (const st of spec.structs) {
    out[`${st.name}_SIZEOF`] = String(mod[`${st.name}_SIZEOF`]);
    for (const f of st.fields) if (!f.padding) out[`${st.name}_OFFSET.${f.name}`] = String(get(`${st.name}_OFFSET`)[f.name]);
  }
  return out;
}

function withoutPadding(c: Values): Values {
  const padding = new Set(spec.structs.flatMap((st) => st.fields.filter((f) => f.padding).map((f) => `${st.name}_OFFSET.${f.name}`)));
  return Object.fromEntries(Object.entries(c).filter(([k]) => !padding.has(k)));
}

// The Python module's constants as strings (its magic is above 2^53), and the offsets its struct
// formats give each field: what Ring.records() and Ring.totals() unpack.
const PY_DUMP = `
import json, re, struct, gpumem_agent.wire as w
out = {}
for k in dir(w):
    v = getattr(w, k)
    if not k.isupper(): continue
    out[k] = {str(a): str(b) for a, b in v.items()} if isinstance(v, dict) else [str(x) for x in v] if isinstance(v, (list, tuple)) else str(v)
for s in ("RECORD", "TOTALS", "HEADER"):
    fmt = getattr(w, s + "_FORMAT", None)
    if fmt is None: continue
    at, offsets = 0, []
    for n, ch in re.findall(r"(\\d*)([a-zA-Z])", fmt[1:]):
        n = int(n or 1)
        if ch != "x":
            offsets += [at + i * struct.calcsize(ch) for i in range(n)]
        at += n * struct.calcsize(ch)
    out[s + "_FORMAT_OFFSETS"] = dict(zip(getattr(w, s + "_FIELDS"), map(str, offsets)))
    out[s + "_FORMAT_SIZE"] = str(struct.calcsize(fmt))
print(json.dumps(out))
`;

function python(): Record<string, unknown> {
  const p = Bun.spawnSync(["python3", "-c", PY_DUMP], { env: { ...process.env, PYTHONPATH: join(ROOT, "agent") }, stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`python3 could not import gpumem_agent.wire:\n${p.stderr}`);
  return JSON.parse(p.stdout.toString());
}

describe("wire contract", () => {
  test("src/ffi/wire.ts and agent/gpumem_agent/wire.py are what cuda/gen-wire.ts makes of the header now", () => {
    expect(staleWireFiles()).toEqual([]);
  });

  test("the C and the C++ compiler agree with the header's reading: every define, enum code, struct size and offset", () => {
    const c = compiled("c");
    expect(Object.keys(c).length).toBeGreaterThan(60);
    expect(compiled("c++")).toEqual(c);
    const expected: Values = {};
    for (const d of spec.defines) expected[d.name] = d.value.toString();
    for (const e of spec.enums) for (const m of e.members) expected[`${e.name}.${m.name}`] = String(m.value);
    for (const st of spec.structs) {
      expected[`${st.name}_SIZEOF`] = String(st.size);
      for (const f of st.fields) expected[`${st.name}_OFFSET.${f.name}`] = String(f.offset);
    }
    expect(expected).toEqual(c);
  });

  test("src/ffi/wire.ts holds the compiler's values, names by code included", () => {
    const mod = wire as unknown as Record<string, unknown>;
    expect(valuesOf(mod)).toEqual(withoutPadding(compiled("c")));
    for (const e of spec.enums) {
      const names = mod[`${e.name}_NAMES`] as Record<number, string>;
      for (const m of e.members) expect({ code: m.value, name: names[m.value] }).toEqual({ code: m.value, name: m.name });
    }
    for (const st of spec.structs) expect([...(mod[`${st.name}_FIELDS`] as string[])]).toEqual(st.fields.filter((f) => !f.padding).map((f) => f.name));
    // The marks start where the header says, and every action below them is the allocator's.
    expect(wire.ACTION.phase).toBe(wire.FIRST_MARK);
    // (free, 15, is the reader's fold of a pair, never written: below the marks, apart from torch's codes.)
    expect(Object.values(wire.ACTION).filter((a) => a < wire.FIRST_MARK)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, wire.ACTION.free]);
    expect(wire.ACTION.free).toBe(15);
  });

  test("agent/gpumem_agent/wire.py holds the compiler's values, and its struct formats unpack each field at its offset", () => {
    const py = python();
    const flat: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(py)) flat[k] = v;
    expect(valuesOf(flat)).toEqual(withoutPadding(compiled("c")));
    for (const st of ["RECORD", "TOTALS"]) {
      const offsets = py[`${st}_FORMAT_OFFSETS`] as Record<string, string>;
      expect(offsets).toEqual(py[`${st}_OFFSET`] as Record<string, string>);
      expect(py[`${st}_FORMAT_SIZE`]).toBe(py[`${st}_SIZEOF`]);
    }
  });
});
