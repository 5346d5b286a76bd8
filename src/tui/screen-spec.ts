// What a screen is to the frame: its key and title, what it draws (from the store's state), what
// it selects among, and the keys it gives a meaning of its own. Each screen's file exports one
// ScreenSpec; the registry lists them (src/tui/registry.tsx).
import type { ReactElement } from "react";
import type { ProcessModel } from "../collect/live";
import type { Process } from "../system/schema";
import type { Controller, ScreenState } from "./controller";
import type { Key } from "./keys";
import type { UiState } from "./ui-state";

/** What every screen is drawn from. */
export interface ScreenProps {
  ctl: Controller;
  /** The last tick's state: every screen draws this one moment. */
  state: ScreenState;
  /** The process the per-process screens show. */
  pm: ProcessModel | undefined;
  ui: UiState;
  /** This screen's selected row. */
  selected: number;
  width: number;
  height: number;
  ascii: boolean;
  /** "2 Process, 3 Tensors and 4 Segments": how to reach screens, by id (the registry's ScreenId). */
  keyHint(ids: string[]): string;
  /** Every screen's key and title, for the help. */
  screens: readonly { key: string; title: string }[];
}

/** What the keys need to know of the screens as they are now. */
export interface KeyContext {
  ctl: Controller;
  exit: () => void;
  onDemo?: () => void;
  /** The Overview's processes in the order shown (by the sort and filter in `ui`). */
  procs: (ui: UiState) => Process[];
  /** The process the per-process screens show. */
  pm: (ui: UiState) => ProcessModel | undefined;
  /** How many rows the current screen selects among (0: none). */
  rows: (ui: UiState) => number;
  /** The row under a line of the screen's body (from 0), or null. */
  rowAt: (ui: UiState, line: number) => number | null;
  /** The screen whose tab is at column `x` (from 1), or null. */
  tabAt: (ui: UiState, x: number) => number | null;
  /** The sort chosen by a click on the table's header at column `x` (from 1), or null. */
  sortAt: (ui: UiState, line: number, x: number) => string | null;
  /** The sorts of the columns the current screen shows, in their order (what `s` steps through). */
  sorts: (ui: UiState) => string[];
  /** The current screen's rows as text, in the selection's order (what F3 searches; [] where the
   *  screen lists none). */
  rowTexts: (ui: UiState) => string[];
  /** Shows another screen, by id (the registry's ScreenId: a screen's file names others by id). */
  show(ui: UiState, id: string): void;
}

export interface ScreenSpec {
  id: string;
  /** The key that shows it (the tabs list the screens in the registry's order). */
  key: string;
  title: string;
  component: (p: ScreenProps) => ReactElement;
  /** How many rows the selection moves over (absent: the screen has no selection). */
  rows?: (p: ScreenProps) => number;
  /** The row under line `line` of the screen (from 0), for a mouse click. */
  rowAt?: (p: ScreenProps, line: number) => number | null;
  /** The sort a click at column `x` (from 1) of line `line` chooses. */
  sortAt?: (p: ScreenProps, line: number, x: number) => string | null;
  /** The sorts of the columns shown, in their order: `s` steps through these only. */
  sorts?: (p: ScreenProps) => string[];
  /** Each row's text, in the selection's order: F3 searches it (absent: no search here). */
  rowTexts?: (p: ScreenProps) => string[];
  /** Sorts by `sort` (a header click, s, I); the same sort again reverses it. */
  sortBy?: (ui: UiState, sort: string) => void;
  /** A key this screen gives a meaning (Enter, Esc, s, I…): true where it took the key. */
  onKey?: (ui: UiState, key: Key, ctx: KeyContext) => boolean;
  /** The selection moved. */
  onSelect?: (ui: UiState) => void;
  /** A click on the row already selected: true where the screen took it (opens it). */
  onClickSelected?: (ui: UiState, row: number) => boolean;
}

/** The next of `list` after `v` (by `by`), round. */
export function cycle<T>(list: readonly T[], v: T, by = 1): T {
  return list[(list.indexOf(v) + by + list.length) % list.length]!;
}

/** Whether `key` is the character `ch`, or the named key `name`. */
export const isChar = (key: Key, ch: string) => key.kind === "char" && key.ch === ch;
export const isKey = (key: Key, name: string) => key.kind === "key" && key.name === name;
