// What a screen draws, made once: its element tree with our own components called through down to
// Ink's (Text, Box), and that tree as one string. Ink's components draw from their props alone, so
// two equal strings draw the same cells: a tick whose screen reads as the last frame did is not
// handed to React, Yoga and Ink at all (the App compares them), and one that changed hands React
// the tree made for the comparison, not the screen to run again. The screens are pure functions of
// their props (no hooks), which is what lets them be called here; one that is not is drawn by
// React every tick (expand throws, the App falls back).
import { createElement, Fragment, isValidElement, type ReactElement, type ReactNode } from "react";
import { Box, Newline, Spacer, Static, Text, Transform } from "ink";

/** Ink's own components: drawn by Ink from their props, never called here (they read contexts). */
const INK = new Map<unknown, string>([[Box, "Box"], [Newline, "Newline"], [Spacer, "Spacer"], [Static, "Static"], [Text, "Text"], [Transform, "Transform"]]);

export interface Drawn {
  /** The tree to hand React: Ink's components and text only. */
  node: ReactNode;
  /** What it draws, as a string. */
  key: string;
}

/** An Ink element made for a tree, with what decides what it draws: its own props as a string
 *  and its children as made (elements kept from the tree before are that same object). */
interface MadeElement {
  own: string;
  kids: ReactNode;
  el: ReactElement;
}

/** Ink's elements of the last tree made, by their place in it: an element whose props draw as the
 *  one's at its place did, over the very children that one had, is that element again, so that
 *  React, given the same object, skips it and all under it (a changed figure re-renders its own
 *  line, not the screen). Decided bottom up, so each element is looked at once. */
let lastMade = new Map<string, MadeElement>();

/** `node` with our components called through, and a string that changes wherever what it draws changes. */
export function expand(node: ReactNode): Drawn {
  const out: string[] = [];
  const made = new Map<string, MadeElement>();
  const tree = walk(node, out, undefined, "", made);
  lastMade = made;
  return { node: tree, key: out.join("") };
}

/** Only the string of `node` (expand's key). */
export function drawn(node: ReactNode): string {
  return expand(node).key;
}

/** `key`: the key the element made here takes (a component's, or its place in a list); `at`: its
 *  place in the tree (lastMade). */
function walk(node: ReactNode, out: string[], key: string | null | undefined, at: string, made: Map<string, MadeElement>): ReactNode {
  if (node === null || node === undefined || typeof node === "boolean") return node;
  if (typeof node === "string" || typeof node === "number" || typeof node === "bigint") {
    out.push(String(node), "\u0000");
    return node;
  }
  if (Array.isArray(node)) {
    out.push("[");
    // An item without a key gets its place as one: what React matches a keyless list by anyway,
    // said so that React does not take the list for one whose keys were forgotten.
    const kids = node.map((n, i) => {
      const own = isValidElement(n) && n.key === null ? `\u0000${i}` : undefined;
      return walk(n as ReactNode, out, own, `${at}[${own ?? (isValidElement(n) ? n.key : i)}]`, made);
    });
    out.push("]");
    return kids;
  }
  if (!isValidElement(node)) throw new Error("a screen drew something other than elements and text");
  const el = node as ReactElement<Record<string, unknown>>;
  const { type, props } = el;
  const ownKey = key ?? el.key;
  if (typeof type === "function" && !INK.has(type)) {
    if ((type as { prototype?: { isReactComponent?: unknown } }).prototype?.isReactComponent) throw new Error("a class component cannot be called here");
    // Its key goes to what it made, for React to match a list's items as before.
    return walk((type as (p: unknown) => ReactNode)(props), out, ownKey, at, made);
  }
  const start = out.length;
  let children: ReactNode;
  let own: string;
  let fn = false;
  if (type === Fragment) {
    out.push("<>");
    own = `${ownKey ?? ""}<>`;
    children = walk(props.children as ReactNode, out, undefined, `${at}<>`, made);
  } else {
    if (typeof type !== "string" && !INK.has(type)) throw new Error("a component React alone can draw"); // memo, context, lazy…
    out.push("<", typeof type === "string" ? type : INK.get(type)!);
    for (const k in props) {
      if (k === "children") continue;
      const v = props[k];
      if (typeof v === "function") {
        fn = true; // what it draws may differ by the function: never the element before (Transform)
        continue;
      }
      out.push(" ", k, "=", typeof v === "object" && v !== null ? JSON.stringify(v) : String(v));
    }
    out.push(">");
    own = `${ownKey ?? ""}\u0000${out.slice(start).join("")}`;
    children = walk(props.children as ReactNode, out, undefined, `${at}<${out[start + 1]}>`, made);
  }
  out.push("</>");
  const before = lastMade.get(at);
  if (!fn && before !== undefined && before.own === own && sameKids(before.kids, children)) {
    made.set(at, before);
    return before.el;
  }
  // The children in the props, as JSX put them (a list given as an argument would want keys).
  const now = children === props.children && ownKey === el.key ? el : createElement(type as string, { ...props, ...(ownKey === null || ownKey === undefined ? {} : { key: ownKey }), children });
  made.set(at, { own, kids: children, el: now });
  return now;
}

/** Children made alike: the same texts, the same element objects, in the same lists. */
function sameKids(a: ReactNode, b: ReactNode): boolean {
  if (a === b) return true;
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!sameKids(a[i] as ReactNode, b[i] as ReactNode)) return false;
  return true;
}
