// `gpumem-tui schema`: the JSON document's JSON Schema.
import { writeOut } from "../headless/out";
import type { Options } from "./options";

export async function command(_opts: Options): Promise<number> {
  const { jsonSchema } = await import("../system/schema");
  await writeOut(`${JSON.stringify(jsonSchema(), null, 2)}\n`);
  return 0;
}
