// What a screen draws, as one string: its element tree with our own components called through
// down to Ink's (Text, Box), which are pure functions of their props. Two equal strings draw the
// same cells, so a tick whose screen reads as the last frame did is not handed to React, Yoga and
// Ink at all (the App compares them): an idle monitor redraws nothing. The screens are pure
// functions of their props (no hooks), which is what lets them be called here.
import { isValidElement, type ReactElement, type ReactNode } from "react";
import { Box, Newline, Spacer, Static, Text, Transform } from "ink";

/** Ink's own components: drawn by Ink from their props, never called here (they read contexts). */
const INK = new Map<unknown, string>([[Box, "Box"], [Newline, "Newline"], [Spacer, "Spacer"], [Static, "Static"], [Text, "Text"], [Transform, "Transform"]]);

/** `node` as a string that changes wherever what it draws changes. */
export function drawn(node: ReactNode): string {
  const out: string[] = [];
  describe(node, out);
  return out.join("");
}

function describe(node: ReactNode, out: string[]): void {
  if (node === null || node === undefined || typeof node === "boolean") return;
  if (typeof node === "string" || typeof node === "number" || typeof node === "bigint") {
    out.push(String(node), "\u0000");
    return;
  }
  if (Array.isArray(node)) {
    out.push("[");
    for (const n of node) describe(n as ReactNode, out);
    out.push("]");
    return;
  }
  if (!isValidElement(node)) {
    // An iterable or a promise: nothing a screen of ours returns; never equal to anything.
    out.push(`\u0001${Math.random()}`);
    return;
  }
  const el = node as ReactElement<Record<string, unknown>>;
  const { type, props } = el;
  if (typeof type === "function" && !INK.has(type)) {
    describe((type as (p: unknown) => ReactNode)(props), out);
    return;
  }
  out.push("<", typeof type === "string" ? type : typeof type === "symbol" ? String(type.description) : (INK.get(type) ?? nameOf(type)));
  for (const k in props) {
    if (k === "children") continue;
    const v = props[k];
    if (typeof v === "function") continue;
    out.push(" ", k, "=", typeof v === "object" && v !== null ? JSON.stringify(v) : String(v));
  }
  out.push(">");
  describe(props.children as ReactNode, out);
  out.push("</>");
}

function nameOf(type: unknown): string {
  const t = type as { displayName?: string; name?: string; render?: { name?: string } };
  return t.displayName || t.name || t.render?.name || "?";
}
