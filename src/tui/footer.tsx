// The status line at the bottom: a message, a question, the filter or search being typed, the
// past's mark, the selected row's finding, and otherwise htop's function-key bar with the
// interval. The bar yields to what is said (as htop's does to its prompts) and stands beside a
// finding's title where the width holds both; it takes no line of its own from the screens.
import { Text } from "ink";
import { color, pad, textWidth } from "./format";

/** The function keys, as htop draws them: the key, then what it does. */
const F_BAR: [string, string][] = [["F1", "Help"], ["F3", "Search"], ["F4", "Filter"], ["F6", "SortBy"], ["F9", "Kill"], ["F10", "Quit"]];
/** Each label's cell, with the space after it. */
const F_LABEL = 7;
export const F_BAR_WIDTH = F_BAR.reduce((n, [k]) => n + k.length + F_LABEL, 0);

export function FunctionBar() {
  return (
    <>
      {F_BAR.map(([k, label]) => (
        <Text key={k}>
          {k}
          <Text inverse color={color("cyan")}>{pad(label, F_LABEL - 1)}</Text>{" "}
        </Text>
      ))}
    </>
  );
}

/**
 * Where the bar goes on a status line of `width` that says `text` (`idle`: nothing but the key
 * hint; `beside`: a line the bar may follow, a finding's title): "first" (the bar, then the
 * text), "after" (the text, then the bar at the right end), or null (the text alone).
 */
export function barPlace(text: string, width: number, how: "idle" | "beside" | "alone"): "first" | "after" | null {
  if (how === "alone" || textWidth(text) + 1 + F_BAR_WIDTH > width) return null;
  return how === "idle" ? "first" : "after";
}
