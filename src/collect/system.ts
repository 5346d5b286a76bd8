// The old path and name of machine.ts's Machine, kept only for src/tui/main.tsx and controller.ts
// while the screens are rewritten (issue 27): those imports move to ./machine, and this file goes.
export { Machine as SystemCollector } from "./machine";
