// What the user has chosen on the screens (which screen, selections, sorts, the filter, a prompt):
// one object that the keys change in order, so that several keys in one read each see what the
// key before left.
import type { ProcessSort } from "./screens/process-table";
import type { TensorSort } from "./screens/tensor-table";

/** A question on the status line that the next key answers. */
export type Prompt =
  | { kind: "empty_cache"; pid: number }
  | { kind: "attach"; pid: number; label: string }
  | { kind: "kill_signal"; pid: number; label: string; command: string | null }
  | { kind: "kill_confirm"; pid: number; label: string; command: string | null; signal: "SIGTERM" | "SIGKILL" };

export interface UiState {
  /** Index into SCREENS (src/tui/registry.tsx). */
  screen: number;
  /** The screen `?` left for Help, where `?` or Esc goes back to. */
  back: number | null;
  /** The screens Enter opened, each with the screen it was opened from, latest last: Esc on the
   *  one opened goes back to where Enter was pressed (Findings opened on Process: back to Process). */
  opened: { screen: number; from: number }[];
  /** The selected row, per screen. */
  selected: number[];
  /** The process the Process, Tensors, Segments, Lines and Findings screens show. */
  pid: number | null;
  procSort: ProcessSort;
  procReverse: boolean;
  tensorSort: TensorSort;
  tensorReverse: boolean;
  /** The groups of alike blocks opened with Enter on the Tensors screen (their keys). */
  tensorOpen: string[];
  filter: string;
  typing: boolean;
  /** F3: the text searched for while it is typed (the selection moves to the first row holding
   *  it, F3 again to the next); null: no search. */
  search: { text: string; found: boolean } | null;
  prompt: Prompt | null;
  /** The finding opened with Enter on the Findings screen (its index there), or null. */
  openFinding: number | null;
  /** The segment opened with Enter on the Segments screen (its address), and the list's
   *  selection that Esc goes back to; null: the list. */
  segment: { address: number; listSelected: number } | null;
  /** A finished step of the past that the per-process screens show (src/tui/moment.ts); null: now. */
  when: number | null;
  /** Tensors: the blocks live now, or alive at the running step's peak or the run's (`P`). */
  peakView?: "now" | "step" | "run";
  /** The Tensors screen: the block whose stack Enter opened (its address) and the table's
   *  selection that Esc goes back to; absent or null: the table. */
  tensorStack?: { address: number; back: number } | null;
  /** The Tensors screen groups blocks by the line of the user's code that allocated them (w). */
  tensorByFrame?: boolean;
  /** The Timeline screen's step (absent or null: the last complete one; "running": the running
   *  one) and the row opened with Enter: the held band, the rest, or a block (its address and the
   *  start of its band), with the step choice that Esc goes back to. */
  timeline?: { step: number | "running" | null; open: { row: "held" | "rest" | "band"; address: number; from_us: number; back: number | "running" | null } | null };
}

export function newUiState(screen: number, screens: number): UiState {
  return {
    screen,
    back: null,
    opened: [],
    selected: new Array(screens).fill(0),
    pid: null,
    procSort: "memory",
    procReverse: false,
    tensorSort: "size",
    tensorReverse: false,
    tensorOpen: [],
    filter: "",
    typing: false,
    search: null,
    prompt: null,
    openFinding: null,
    segment: null,
    when: null,
  };
}
