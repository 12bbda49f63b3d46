// Renders views with the TypeScript formats, for tests/test_typescript_client.py to compare
// with the Python client's: reads [view, …] as JSON from the file named by argv[2] and
// prints [{openai: {drop, text}, anthropic: {drop, text}} | {error}, …].
import { readFileSync } from "node:fs";

import { toAnthropicMessages, toOpenAIMessages } from "../dist/index.js";

const views = JSON.parse(readFileSync(process.argv[2], "utf8"));
const render = (view) => {
  try {
    const out = { openai: {}, anthropic: {} };
    for (const journal of ["drop", "text"]) {
      out.openai[journal] = toOpenAIMessages(view, { journal });
      out.anthropic[journal] = toAnthropicMessages(view, { journal });
    }
    return out;
  } catch (error) {
    return { error: String(error) };
  }
};
process.stdout.write(JSON.stringify(views.map(render)));
