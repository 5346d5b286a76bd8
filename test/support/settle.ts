// After input to an ink app under test (ink-testing-library): wait until what it set going has run.
// A fixed sleep was the tests' guess, and on a loaded machine it lost (`bun run test` runs files in
// parallel on two cores): React renders and runs effects in setImmediate turns of 5 ms slices (its
// scheduler), and a process that was stopped finds the test's timer due before those turns come.
// So: the time the input itself waits on (a lone Esc: Ink holds it 20 ms for the rest of a
// sequence), then turns of setImmediate, each queued behind React's next slice. Where nothing is
// queued they cost microseconds.
const TURNS = 20;

export async function settle(ms = 30): Promise<void> {
  await Bun.sleep(ms);
  for (let i = 0; i < TURNS; i++) await new Promise((r) => setImmediate(r));
}
