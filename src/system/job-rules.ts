// When the Overview calls a rank of a job behind, or the first to die: the thresholds, stated once
// for the code that applies them (jobs.ts) and the schema that describes them to scripts.

/**
 * A rank is behind when it is more than BEHIND_STEPS steps behind the leading rank AND more than
 * BEHIND_SECONDS behind it in time (the steps it lacks at the leading ranks' step time). Ranks of
 * one job are often a step apart for a moment (each counts its step when its optimizer steps), and
 * fast steps drift several apart within a second: neither is a rank holding the job back.
 */
export const BEHIND_STEPS = 1;
export const BEHIND_SECONDS = 10;
/** The threshold, in words, for the notes' readers and the README. */
export const BEHIND_WORDS = `more than ${BEHIND_STEPS} step and more than ${BEHIND_SECONDS} s behind the leading rank`;

/** How often a live agent writes the time into its ring's header (agent.py's SYNC_SECONDS), and
 *  the lead one rank's silence must have over every other's to be called the first to die. */
export const HEARTBEAT_SECONDS = 0.25;
export const FIRST_DIED_LEAD_SECONDS = 2 * HEARTBEAT_SECONDS;
