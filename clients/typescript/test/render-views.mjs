// Renders views with the TypeScript formats, for tests/test_typescript_client.py to compare
// with the Python client's: reads [view, …] as JSON from the file named by argv[2] and
// prints [{openai: {drop, text}, anthropic: {drop, text}, ai: [problem, …]} | {error}, …].
// `ai` lists what is wrong with the view as Vercel AI SDK ModelMessages: what the SDK's own
// schema refuses, and a tool call not answered in the tool message right after it.
import { readFileSync } from "node:fs";

import { modelMessageSchema } from "ai";

import { toModelMessages } from "../dist/ai.js";
import { toAnthropicMessages, toOpenAIMessages } from "../dist/index.js";

function aiProblems(view) {
  const messages = toModelMessages(view);
  const problems = [];
  messages.forEach((message, i) => {
    const parsed = modelMessageSchema.safeParse(message);
    if (!parsed.success) problems.push(`message ${i}: ${parsed.error.message.slice(0, 200)}`);
    if (message.role !== "assistant" || typeof message.content === "string") return;
    const calls = message.content.filter((part) => part.type === "tool-call").map((part) => part.toolCallId);
    if (!calls.length) return;
    const next = messages[i + 1];
    const answered = next?.role === "tool" ? next.content.map((part) => part.toolCallId) : [];
    if (calls.some((id) => !answered.includes(id))) problems.push(`message ${i}: calls ${calls} not all answered next`);
  });
  return problems;
}

const views = JSON.parse(readFileSync(process.argv[2], "utf8"));
const render = (view) => {
  try {
    const out = { openai: {}, anthropic: {}, ai: aiProblems(view) };
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
