// A screen rendered on its own at a width beyond ink-testing-library's terminal (100 columns,
// fixed): inside a box that wide, as the App lays every screen out (app.tsx), so that ink lays the
// screen's lines at the width the screen was told rather than wrapping them again at 100.
import { Box } from "ink";
import type { ReactNode } from "react";

export function Wide({ columns, children }: { columns: number; children: ReactNode }) {
  return <Box width={columns} flexDirection="column">{children}</Box>;
}
