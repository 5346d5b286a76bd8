#!/usr/bin/env bun
// Writes the ring's constants for the code that does not include cuda/gpumem_ring.h: TypeScript
// (src/ffi/wire.ts) and Python (agent/gpumem_agent/wire.py, plain: the agent has no dependencies).
// Both are generated, so the header stays the one definition; a name loses its GPUMEM_ prefix and
// is the same in both languages.
//   bun cuda/gen-wire.ts           write both files
//   bun cuda/gen-wire.ts --check   exit 1 if either differs from what the header gives
// test/ffi/wire.test.ts runs the check, and compiles the header to hold every value to the C compiler.
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseHeader, type WireEnum, type WireSpec, type WireStruct } from "./wire-header";

const ROOT = resolve(import.meta.dir, "..");
export const HEADER_PATH = join(ROOT, "cuda", "gpumem_ring.h");
export const TS_PATH = join(ROOT, "src", "ffi", "wire.ts");
export const PY_PATH = join(ROOT, "agent", "gpumem_agent", "wire.py");

const GENERATED = "Generated from cuda/gpumem_ring.h by cuda/gen-wire.ts: do not edit. Change the header, then run `bun cuda/gen-wire.ts`.";
const PY_FORMAT: Record<string, string> = { uint8_t: "B", int8_t: "b", uint16_t: "H", int16_t: "h", uint32_t: "I", int32_t: "i", uint64_t: "Q", int64_t: "q", float: "f", double: "d" };

/** `text` in lines of at most `width` characters, each starting with `prefix`. */
function wrap(text: string, prefix: string, width = 100): string[] {
  if (!text) return [];
  const out: string[] = [];
  let line = prefix;
  for (const word of text.split(" ")) {
    if (line.length + word.length + 1 > width && line !== prefix) {
      out.push(line.trimEnd());
      line = prefix;
    }
    line += (line === prefix ? "" : " ") + word;
  }
  out.push(line.trimEnd());
  return out;
}

const tsDoc = (text: string, indent = "") => (text ? (text.length + indent.length < 92 ? [`${indent}/** ${text} */`] : [`${indent}/**`, ...wrap(text, `${indent} * `), `${indent} */`]) : []);
const pyDoc = (text: string, indent = "") => wrap(text, `${indent}# `);

/** Values above 2^53 are not exact as doubles: TypeScript gets them as bigint. */
function tsNumber(v: bigint): string {
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? `0x${v.toString(16)}n` : v.toString();
}

/** The codes 0..n−1, each once: names by code fit an array. */
function dense(e: WireEnum): boolean {
  return e.members.every((m, i) => m.value === i);
}

/** Fields that hold values (padding left out), in order. */
const valueFields = (s: WireStruct) => s.fields.filter((f) => !f.padding);

/** The struct module's format for a struct of scalars (padding as x), or null when it nests one. */
function pyFormat(s: WireStruct): string | null {
  const runs: Array<[string, number]> = [];
  const put = (ch: string, n: number) => {
    const last = runs[runs.length - 1];
    if (last && last[0] === ch) last[1] += n;
    else if (n > 0) runs.push([ch, n]);
  };
  let at = 0;
  for (const f of s.fields) {
    const ch = PY_FORMAT[f.cType];
    if (!ch || (!f.padding && f.count !== 1)) return null;
    put("x", f.offset - at);
    if (f.padding) put("x", f.size);
    else put(ch, 1);
    at = f.offset + f.size;
  }
  put("x", s.size - at);
  return `<${runs.map(([ch, n]) => (n > 1 || ch === "x" ? `${n}${ch}` : ch)).join("")}`;
}

export function renderTs(spec: WireSpec): string {
  const out = [`// ${GENERATED}`, "// test/ffi/wire.test.ts fails while it is stale, and holds every value to the C compiler's.", ""];
  for (const d of spec.defines) out.push(...tsDoc(d.doc), `export const ${d.name} = ${tsNumber(d.value)};`);
  for (const e of spec.enums) {
    out.push("", ...tsDoc(`${e.doc ? `${e.doc} ` : ""}(enum ${e.cName})`), `export const ${e.name} = {`);
    for (const m of e.members) out.push(...tsDoc(m.doc, "  "), `  ${m.name}: ${m.value},`);
    out.push("} as const;", `/** ${e.name}'s names by code. */`);
    if (dense(e)) out.push(`export const ${e.name}_NAMES = [${e.members.map((m) => JSON.stringify(m.name)).join(", ")}] as const;`);
    else {
      out.push(`export const ${e.name}_NAMES: Readonly<Record<number, keyof typeof ${e.name}>> = {`);
      for (const m of e.members) out.push(`  ${m.value}: ${JSON.stringify(m.name)},`);
      out.push("};");
    }
  }
  for (const s of spec.structs) {
    out.push("", ...tsDoc(`${s.doc ? `${s.doc} ` : ""}(struct ${s.cName}: byte offsets of its fields)`), `export const ${s.name}_OFFSET = {`);
    for (const f of valueFields(s)) out.push(...tsDoc(`${f.cType}${f.count > 1 ? `[${f.count}]` : ""}${f.doc ? `: ${f.doc}` : ""}`, "  "), `  ${f.name}: ${f.offset},`);
    out.push("} as const;", `export const ${s.name}_SIZEOF = ${s.size};`);
    out.push(`/** ${s.name}'s fields in order (padding left out). */`, `export const ${s.name}_FIELDS = [${valueFields(s).map((f) => JSON.stringify(f.name)).join(", ")}] as const;`);
  }
  return `${out.join("\n")}\n`;
}

export function renderPy(spec: WireSpec): string {
  const out = [`"""The event ring's constants for Python (offsets, codes, struct formats).`, "", ...wrap(GENERATED, ""), `test/ffi/wire.test.ts fails while it is stale, and holds every value to the C compiler's.`, `"""`, ""];
  for (const d of spec.defines) {
    const v = d.value > 0xffffn ? `0x${d.value.toString(16).toUpperCase()}` : d.value.toString();
    out.push(...pyDoc(d.doc), `${d.name} = ${v}`);
  }
  for (const e of spec.enums) {
    out.push("", ...pyDoc(`${e.doc ? `${e.doc} ` : ""}(enum ${e.cName})`), `${e.name} = {`);
    for (const m of e.members) out.push(...pyDoc(m.doc, "    "), `    ${JSON.stringify(m.name)}: ${m.value},`);
    out.push("}");
    if (dense(e)) out.push(`${e.name}_NAMES = [${e.members.map((m) => JSON.stringify(m.name)).join(", ")}]`);
    else out.push(`${e.name}_NAMES = {`, ...e.members.map((m) => `    ${m.value}: ${JSON.stringify(m.name)},`), "}");
  }
  for (const s of spec.structs) {
    out.push("", ...pyDoc(`${s.doc ? `${s.doc} ` : ""}(struct ${s.cName}: byte offsets of its fields)`), `${s.name}_OFFSET = {`);
    for (const f of valueFields(s)) out.push(...pyDoc(`${f.cType}${f.count > 1 ? `[${f.count}]` : ""}${f.doc ? `: ${f.doc}` : ""}`, "    "), `    ${JSON.stringify(f.name)}: ${f.offset},`);
    out.push("}", `${s.name}_SIZEOF = ${s.size}`, `${s.name}_FIELDS = (${valueFields(s).map((f) => JSON.stringify(f.name)).join(", ")}${valueFields(s).length === 1 ? "," : ""})`);
    const fmt = pyFormat(s);
    if (fmt) out.push(`${s.name}_FORMAT = ${JSON.stringify(fmt)}  # struct module: ${s.name}_FIELDS in order, padding skipped`);
  }
  return `${out.join("\n")}\n`;
}

/** What the header gives now, file by file. */
export function renderWire(header = readFileSync(HEADER_PATH, "utf8")): Array<{ path: string; text: string }> {
  const spec = parseHeader(header, "cuda/gpumem_ring.h");
  return [
    { path: TS_PATH, text: renderTs(spec) },
    { path: PY_PATH, text: renderPy(spec) },
  ];
}

/** The generated files that differ from what the header gives (repository-relative paths). */
export function staleWireFiles(): string[] {
  return renderWire()
    .filter((f) => {
      try {
        return readFileSync(f.path, "utf8") !== f.text;
      } catch {
        return true;
      }
    })
    .map((f) => f.path.slice(ROOT.length + 1));
}

if (import.meta.main) {
  if (process.argv.includes("--check")) {
    const stale = staleWireFiles();
    if (stale.length) {
      console.error(`gen-wire: ${stale.join(" and ")} ${stale.length > 1 ? "are" : "is"} stale: run \`bun cuda/gen-wire.ts\``);
      process.exit(1);
    }
  } else for (const f of renderWire()) writeFileSync(f.path, f.text);
}
