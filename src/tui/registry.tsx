// Every screen, in one list, one line each: its file exports what the frame needs of it (its key,
// its title, what it draws from the store's state, what it selects and sorts, its own keys:
// src/tui/screen-spec.ts). The tabs show them in this order; the tabs, the help, the keys and the
// hints that name screens ("2 Process") all read this list.
import { findingsScreen } from "./screens/findings";
import { helpScreen } from "./screens/help";
import { linesScreen } from "./screens/lines";
import { overviewScreen } from "./screens/overview";
import { processScreen } from "./screens/process";
import { segmentsScreen } from "./screens/segments";
import { tensorsScreen } from "./screens/tensors";
import type { ScreenSpec } from "./screen-spec";

export type { ScreenProps } from "./screen-spec";

const LIST = [overviewScreen, processScreen, tensorsScreen, segmentsScreen, linesScreen, findingsScreen, helpScreen] as const;

export type ScreenId = (typeof LIST)[number]["id"];

export interface Screen extends ScreenSpec {
  id: ScreenId;
}

export const SCREENS: readonly Screen[] = LIST;

export function screenIndex(id: ScreenId): number {
  return SCREENS.findIndex((s) => s.id === id);
}

/** "2 Process, 3 Tensors and 4 Segments". */
export function keyHint(ids: ScreenId[]): string {
  const named = ids.map((id) => SCREENS[screenIndex(id)]!).map((s) => `${s.key} ${s.title}`);
  return named.length > 1 ? `${named.slice(0, -1).join(", ")} and ${named.at(-1)}` : (named[0] ?? "");
}
