// Renders views with the TypeScript formats, for tests/test_typescript_client.py to compare
// with the Python client's and the server's: reads [view, …] as JSON from the file named by argv[2]
// and prints [{openai: {drop, text}, anthropic: {drop, text}, gemini: {drop, text},
// ai: [problem, …]} | {error}, …]; a renderer that found nothing to send gives "nothing_to_send".
// `ai` lists what is wrong with the view as Vercel AI SDK ModelMessages: what the SDK's own
// schema refuses, and a tool call not answered in the tool message right after it.
import { readFileSync } from "node:fs";

import { modelMessageSchema } from "ai";

import { toModelMessages } from "../dist/ai.js";
import { NothingToSend, toAnthropicMessages, toGeminiContents, toOpenAIMessages } from "../dist/index.js";

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
const orNothing = (make) => {
  try {
    return make();
  } catch (error) {
    if (error instanceof NothingToSend) return "nothing_to_send";
    throw error;
  }
};
const render = (view) => {
  try {
    const out = { openai: {}, anthropic: {}, gemini: {}, ai: aiProblems(view) };
    for (const journal of ["drop", "text"]) {
      out.openai[journal] = orNothing(() => toOpenAIMessages(view, { journal }));
      out.anthropic[journal] = orNothing(() => toAnthropicMessages(view, { journal }));
      out.gemini[journal] = orNothing(() => toGeminiContents(view, { journal }));
    }
    return out;
  } catch (error) {
    return { error: String(error) };
  }
};
process.stdout.write(JSON.stringify(views.map(render)));
