// The old path of name-requests.ts, kept only for src/tui/screens/tensors.tsx while the screens are
// rewritten (issue 27): that import moves to ./name-requests, and this file goes with it.
export type { NamesStatus } from "./name-requests";
