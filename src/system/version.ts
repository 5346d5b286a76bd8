// The headless document's version: bumped when a field changes meaning or disappears.
// Apart from schema.ts so that printing a document does not load zod (25 ms of start-up).
// 2: a PyTorch process carries its profile (detail, steps, categories, tensors, findings).
export const SCHEMA_VERSION = 2;
