// Reads cuda/gpumem_ring.h into a plain description of the wire: its object-like defines, its enums
// and its structs with every field's offset, laid out by the C rules for fixed-width fields (each
// field at a multiple of its alignment, the struct's size a multiple of its largest). cuda/gen-wire.ts
// writes the TypeScript and Python constants from it; test/ffi/wire.test.ts holds it to the C compiler.
// Strict on purpose: a line inside an enum or a struct that it cannot read is an error, never skipped.

export interface Doc {
  /** The comment beside the item or on the lines before it, in one line ("" when none). */
  doc: string;
}

export interface Define extends Doc {
  /** Without the GPUMEM_ prefix. */
  name: string;
  value: bigint;
}

export interface EnumMember extends Doc {
  /** Lower case, without the enum's prefix: GPUMEM_ACTION_FREE_REQUESTED → free_requested. */
  name: string;
  cName: string;
  value: number;
}

export interface WireEnum extends Doc {
  /** gpumem_action → ACTION. */
  name: string;
  cName: string;
  members: EnumMember[];
}

export interface Field extends Doc {
  name: string;
  cType: string;
  /** Elements (1 for a plain field). */
  count: number;
  offset: number;
  size: number;
  /** pad, pad0…, reserved_*: room kept, no value. */
  padding: boolean;
}

export interface WireStruct extends Doc {
  /** gpumem_totals → TOTALS. */
  name: string;
  cName: string;
  size: number;
  align: number;
  fields: Field[];
}

/** One row of a rule table (an X-macro such as GPUMEM_TOTALS_RULE): an action and its effects. */
export interface RuleRow {
  /** The action's name, lower case: FREE_REQUESTED → free_requested. */
  action: string;
  /** Column → −1, 0 or +1. */
  signs: Record<string, number>;
  /** The counter it adds one to (a field of the struct the rule is about), or null. */
  count: string | null;
}

export interface WireRule extends Doc {
  /** GPUMEM_TOTALS_RULE → TOTALS_RULE. */
  name: string;
  cName: string;
  columns: string[];
  rows: RuleRow[];
}

export interface WireSpec {
  defines: Define[];
  enums: WireEnum[];
  structs: WireStruct[];
  rules: WireRule[];
}

/** The columns of each rule table the header may hold, and the struct whose fields its counts name. */
const RULES: Record<string, { columns: string[]; counts: string; actions: string }> = {
  GPUMEM_TOTALS_RULE: { columns: ["requested", "allocated", "active", "reserved"], counts: "gpumem_totals", actions: "gpumem_action" },
};

/** A rule table: `#define NAME(X) \` then one `X(ACTION, signs…, count)` a line. */
function parseRule(text: string, m: RegExpExecArray, spec: WireSpec, path: string): WireRule {
  const cName = m[1]!;
  const shape = RULES[cName];
  const line = lineOf(text, m.index);
  if (!shape) throw new HeaderError(`${path}:${line}: ${cName} is not a rule table this reader knows`);
  const actions = spec.enums.find((e) => e.cName === shape.actions);
  const counts = spec.structs.find((s) => s.cName === shape.counts);
  if (!actions || !counts) throw new HeaderError(`${path}:${line}: ${cName} comes before enum ${shape.actions} or struct ${shape.counts}`);
  const rows: RuleRow[] = [];
  const body = m[2]!.split("\n");
  body.forEach((raw, k) => {
    const code = raw.replace(/\\\s*$/, "").trim();
    if (!code) return;
    const where = `${path}:${line + 1 + k}`;
    const rm = /^X\(\s*(\w+)\s*,([^)]*)\)$/.exec(code);
    if (!rm) throw new HeaderError(`${where}: cannot read the row ${JSON.stringify(code)} of ${cName} (want X(ACTION, ${shape.columns.join(", ")}, count))`);
    const cells = rm[2]!.split(",").map((c) => c.trim());
    if (cells.length !== shape.columns.length + 1) throw new HeaderError(`${where}: ${cName}'s rows have ${shape.columns.length + 1} cells after the action, this one ${cells.length}`);
    const action = rm[1]!.toLowerCase();
    if (!actions.members.some((a) => a.name === action)) throw new HeaderError(`${where}: ${rm[1]} is not an action of enum ${shape.actions}`);
    if (rows.some((r) => r.action === action)) throw new HeaderError(`${where}: ${rm[1]} has a second row`);
    const signs: Record<string, number> = {};
    shape.columns.forEach((col, i) => {
      const v = Number(cells[i]);
      if (v !== -1 && v !== 0 && v !== 1) throw new HeaderError(`${where}: ${col} is ${JSON.stringify(cells[i])}, not -1, 0 or +1`);
      signs[col] = v;
    });
    const count = cells[shape.columns.length]!;
    if (count !== "none" && !counts.fields.some((f) => f.name === count && !f.padding)) throw new HeaderError(`${where}: the count ${count} is not a field of ${shape.counts} (or none)`);
    rows.push({ action, signs, count: count === "none" ? null : count });
  });
  return { name: cName.replace(/^GPUMEM_/, ""), cName, columns: shape.columns, rows, doc: docBefore(text, m.index) };
}

const SCALARS: Record<string, number> = {
  uint8_t: 1, int8_t: 1, uint16_t: 2, int16_t: 2, uint32_t: 4, int32_t: 4, uint64_t: 8, int64_t: 8, float: 4, double: 8,
};
const BUILTIN: Record<string, bigint> = { UINT64_MAX: (1n << 64n) - 1n, UINT32_MAX: (1n << 32n) - 1n };

/** A comment's text in one line: markers, leading stars and runs of spaces gone. */
function commentText(c: string): string {
  return c
    .replace(/^\/\*+/, "")
    .replace(/\*+\/$/, "")
    .split("\n")
    .map((l) => l.replace(/^\s*\*(?!\/)\s?/, "").trim())
    .join(" ")
    .replace(/\s+/g, " ")
    .trim();
}

class HeaderError extends Error {
  override name = "HeaderError";
}

/** The value of a constant expression: integer literals, known names, + − * << and parentheses. */
function evaluate(expr: string, known: Map<string, bigint>, where: string): bigint {
  const src = expr.trim();
  const tokens = src.match(/0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*|[A-Za-z_]\w*|<<|[-+*()]/g) ?? [];
  if (tokens.join("") !== src.replace(/\s+/g, "")) throw new HeaderError(`${where}: cannot read the value ${JSON.stringify(src)}`);
  let i = 0;
  const atom = (): bigint => {
    const t = tokens[i++];
    if (t === undefined) throw new HeaderError(`${where}: the value ${JSON.stringify(src)} ends too early`);
    if (t === "(") {
      const v = sum();
      if (tokens[i++] !== ")") throw new HeaderError(`${where}: unbalanced parentheses in ${JSON.stringify(src)}`);
      return v;
    }
    if (t === "-") return -atom();
    if (/^\d|^0[xX]/.test(t)) return BigInt(t.replace(/[uUlL]+$/, ""));
    const v = known.get(t) ?? BUILTIN[t];
    if (v === undefined) throw new HeaderError(`${where}: ${t} is not defined before it is used`);
    return v;
  };
  const product = (): bigint => {
    let v = atom();
    while (tokens[i] === "*") (i++, (v *= atom()));
    return v;
  };
  const sum = (): bigint => {
    let v = product();
    while (tokens[i] === "+" || tokens[i] === "-" || tokens[i] === "<<") {
      const op = tokens[i++];
      const r = product();
      v = op === "+" ? v + r : op === "-" ? v - r : v << r;
    }
    return v;
  };
  const v = sum();
  if (i !== tokens.length) throw new HeaderError(`${where}: cannot read the value ${JSON.stringify(src)}`);
  return v;
}

interface Item {
  code: string;
  doc: string;
  line: number;
}

/**
 * The members of an enum or struct body, split at `sep`, each with its comment: one that starts on
 * the member's own line (before or after the separator) is its; one on lines of its own belongs to
 * the member after it.
 */
function items(body: string, sep: "," | ";", firstLine: number): Item[] {
  const out: Item[] = [];
  let code = "";
  let line = firstLine;
  let codeLine = -1;
  let leading: string[] = [];
  let lastEndLine = -1;
  for (let i = 0; i < body.length; ) {
    if (body.startsWith("/*", i)) {
      const end = body.indexOf("*/", i + 2);
      if (end < 0) throw new HeaderError(`line ${line}: a comment that does not close`);
      const text = commentText(body.slice(i, end + 2));
      if (code.trim()) leading.push(text); // beside a member not yet closed (the last, without a separator)
      else if (out.length && lastEndLine === line) out[out.length - 1]!.doc = [out[out.length - 1]!.doc, text].filter(Boolean).join(" ");
      else leading.push(text);
      for (let k = i; k < end + 2; k++) if (body[k] === "\n") line++;
      i = end + 2;
      continue;
    }
    const ch = body[i]!;
    if (ch === sep) {
      out.push({ code: code.trim(), doc: leading.join(" "), line: codeLine });
      code = "";
      leading = [];
      lastEndLine = line;
    } else {
      if (!/\s/.test(ch) && !code.trim()) codeLine = line;
      code += ch;
      if (ch === "\n") line++;
    }
    i++;
  }
  if (code.trim()) out.push({ code: code.trim(), doc: leading.join(" "), line: codeLine });
  return out;
}

function lineOf(text: string, index: number): number {
  let n = 1;
  for (let i = 0; i < index; i++) if (text.charCodeAt(i) === 10) n++;
  return n;
}

/** The comment on the lines right before `index`, one that starts a line of its own ("" when none). */
function docBefore(text: string, index: number): string {
  const before = text.slice(0, index).replace(/\s*$/, "");
  if (!before.endsWith("*/")) return "";
  const start = before.lastIndexOf("/*");
  if (start < 0 || !/(^|\n)[ \t]*$/.test(before.slice(0, start))) return "";
  return commentText(before.slice(start));
}

/** Parse the ring header. `path` only names it in errors. */
export function parseHeader(text: string, path = "gpumem_ring.h"): WireSpec {
  const known = new Map<string, bigint>();
  const defines: Define[] = [];
  const enums: WireEnum[] = [];
  const structs: WireStruct[] = [];
  const structByC = new Map<string, WireStruct>();
  const re = /^#define[ \t]+(GPUMEM_\w+)[ \t]+([^\n]*?)[ \t]*(\/\*[^\n]*?\*\/)?[ \t]*$|^enum[ \t]+(\w+)[ \t]*\{([\s\S]*?)\};|^typedef[ \t]+struct[ \t]+(\w+)[ \t]*\{([\s\S]*?)\}[ \t]*(\w+)[ \t]*;/gm;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const line = lineOf(text, m.index);
    const where = `${path}:${line}`;
    if (m[1]) {
      const [, cName, expr, comment] = m;
      if (cName!.endsWith("_H")) continue; // the include guard (function-like macros never match)
      const value = evaluate(expr!, known, where);
      known.set(cName!, value);
      defines.push({ name: cName!.replace(/^GPUMEM_/, ""), value, doc: comment ? commentText(comment) : docBefore(text, m.index) });
    } else if (m[4]) {
      const cName = m[4];
      const prefix = `${cName.toUpperCase()}_`;
      const members: EnumMember[] = [];
      let next = 0;
      for (const it of items(m[5]!, ",", lineOf(text, m.index + m[0].indexOf("{")))) {
        const mm = /^(\w+)(?:\s*=\s*([\s\S]+))?$/.exec(it.code);
        if (!mm || !mm[1]!.startsWith(prefix)) throw new HeaderError(`${path}:${it.line}: cannot read the member ${JSON.stringify(it.code)} of enum ${cName} (want ${prefix}NAME = VALUE)`);
        const value = mm[2] === undefined ? next : Number(evaluate(mm[2], known, `${path}:${it.line}`));
        known.set(mm[1]!, BigInt(value));
        members.push({ name: mm[1]!.slice(prefix.length).toLowerCase(), cName: mm[1]!, value, doc: it.doc });
        next = value + 1;
      }
      enums.push({ name: cName.replace(/^gpumem_/, "").toUpperCase(), cName, members, doc: docBefore(text, m.index) });
    } else {
      const cName = m[6]!;
      if (m[8] !== cName) throw new HeaderError(`${where}: typedef struct ${cName} names itself ${m[8]}`);
      const fields: Field[] = [];
      let offset = 0;
      let align = 1;
      for (const it of items(m[7]!, ";", lineOf(text, m.index + m[0].indexOf("{")))) {
        const fm = /^(\w+)\s+(\w+)(?:\s*\[([^\]]+)\])?$/.exec(it.code);
        if (!fm) throw new HeaderError(`${path}:${it.line}: cannot read the field ${JSON.stringify(it.code)} of ${cName} (want TYPE NAME or TYPE NAME[N])`);
        const [, cType, name, countExpr] = fm;
        const inner = structByC.get(cType!);
        const size = SCALARS[cType!] ?? inner?.size;
        if (size === undefined) throw new HeaderError(`${path}:${it.line}: ${cName}.${name} has the type ${cType}, which is neither a fixed-width scalar nor a struct defined above`);
        const fieldAlign = inner ? inner.align : size;
        const count = countExpr === undefined ? 1 : Number(evaluate(countExpr, known, `${path}:${it.line}`));
        offset = Math.ceil(offset / fieldAlign) * fieldAlign;
        fields.push({ name: name!, cType: cType!, count, offset, size: size * count, padding: /^pad\d*$|^reserved_/.test(name!), doc: it.doc });
        offset += size * count;
        align = Math.max(align, fieldAlign);
      }
      const s: WireStruct = { name: cName.replace(/^gpumem_/, "").toUpperCase(), cName, size: Math.ceil(offset / align) * align, align, fields, doc: docBefore(text, m.index) };
      structs.push(s);
      structByC.set(cName, s);
    }
  }
  if (enums.length === 0 || structs.length === 0) throw new HeaderError(`${path}: no enum or no struct found: is this the ring header?`);
  const spec: WireSpec = { defines, enums, structs, rules: [] };
  const ruleRe = /^#define[ \t]+(GPUMEM_\w+_RULE)\(X\)[ \t]*\\[ \t]*\n((?:[^\n]*\\[ \t]*\n)*[^\n]*)$/gm;
  for (let m = ruleRe.exec(text); m; m = ruleRe.exec(text)) spec.rules.push(parseRule(text, m, spec, path));
  return spec;
}
