/** A support module's folder in the tests' temporary folder (test/support/tmp.ts) whose name starts
 *  so is kept from file to file where a worker runs several (`bun run test`): it holds what the
 *  module made for every file (the C built for the tests, test/support/native.ts), not what a test
 *  left. */
export const KEEP = ".keep-";
