// Preloaded first (test/support/tmp.ts imports it): a process a test starts with Bun.spawn or
// Bun.spawnSync and no `env` gets process.env as it is then, as node:child_process gives it, and
// not the environment Bun started with (what Bun 1.4.4 passes on). So what the preload sets (the
// tests' folder in TMPDIR) reaches every child, and what it takes out reaches none.
//
// Taken out: BUN_JSC_useFTLJIT, which package.json's `test` sets to 0 for the test workers alone.
// JavaScriptCore's last tier (FTL) compiles hot code on threads of its own for a speed that a test's
// short stretches of model and screen code seldom live to use (bench/results/test-time-38-ftl: the
// suite's CPU with and without it). The programs the tests start (monitors, CLIs, the agent's
// interpreters) are the product as a user runs it, with every tier: a refusal bounded in time, such
// as a pickle bomb's, is measured at the speed a user gets.
delete process.env.BUN_JSC_useFTLJIT;

type Options = { env?: Record<string, string | undefined> } | undefined;

function withEnv<F extends (...args: never[]) => unknown>(spawn: F): F {
  const call = spawn as unknown as (a: unknown, b?: Options) => unknown;
  return ((a: unknown, b?: Options) => {
    if (Array.isArray(a)) return call.call(Bun, a, b?.env ? b : { ...b, env: process.env });
    const o = a as Options;
    return call.call(Bun, o?.env ? o : { ...o, env: process.env });
  }) as unknown as F;
}

Bun.spawn = withEnv(Bun.spawn);
Bun.spawnSync = withEnv(Bun.spawnSync);
