// Loading the screens (Ink, React) for the commands that open them.
/**
 * The screens, with React's production build unless the user's NODE_ENV says otherwise: its
 * development build costs the monitor about a tenth more CPU and the demo a tenth more memory
 * (bench/results/tui-resources.md, both builds side by side).
 * React reads NODE_ENV once, as its modules load; a program started by `run` gets the
 * environment as it was.
 */
export async function loadScreens(): Promise<typeof import("../tui/main")> {
  if (process.env.NODE_ENV !== undefined) return await import("../tui/main");
  process.env.NODE_ENV = "production";
  try {
    return await import("../tui/main");
  } finally {
    delete process.env.NODE_ENV;
  }
}

