// A headline of short pieces ("allocated 1.22 GiB", "peak 2.88 GiB", "step 40") drawn in as many
// lines as the width needs, broken between pieces (format.ts's flow): a narrow terminal gets one
// more line, never a figure cut in two. Screens count the lines (flowLines) in their budget.
import { Text } from "ink";
import type { ReactNode } from "react";
import { clauses, flow, pad, textWidth } from "../format";

/** A piece of a headline: its text as laid out, and how it is drawn (default: the text). */
export interface Piece {
  text: string;
  node?: ReactNode;
  /** What comes before it on a line (default two spaces; a sentence's next clause: one). */
  sep?: string;
}

const seps = (pieces: Piece[]) => pieces.map((p) => p.sep ?? "  ");

/** How many lines `pieces` take in `width` columns. */
export const flowLines = (pieces: Piece[], width: number): number => flow(pieces.map((p) => p.text), width, seps(pieces)).length;

/** A sentence as pieces broken after its commas and semicolons. */
export const clausePieces = (text: string): Piece[] => clauses(text).map((t, i) => ({ text: t, sep: i ? " " : "  " }));

/** The pieces in lines of at most `width` columns; a piece wider than a line is cut at its end. */
export function Flow({ pieces, width, dim, color }: { pieces: Piece[]; width: number; dim?: boolean; color?: string }) {
  const lines = flow(pieces.map((p) => p.text), width, seps(pieces));
  return (
    <>
      {lines.map((idx, i) => (
        <Text key={i} dimColor={dim} color={color}>
          {idx.map((k, j) => {
            const p = pieces[k]!;
            const wide = textWidth(p.text) > width;
            return (
              <Text key={k}>
                {j ? (p.sep ?? "  ") : ""}
                {wide ? pad(p.text, width) : (p.node ?? p.text)}
              </Text>
            );
          })}
        </Text>
      ))}
    </>
  );
}
