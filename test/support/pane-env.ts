// The environment a test's tmux server starts with, and so its panes': this run's (TMUX_TMPDIR its
// folder, test/support/tmp.ts) but for `bun test`'s NODE_ENV=test, so that a monitor in a terminal
// runs React's production build as a user's does (NODE_ENV unset: src/commands/screens.ts).
export function paneEnv(): NodeJS.ProcessEnv {
  const { NODE_ENV: _, ...env } = process.env;
  return env;
}
