// MemoryuiSession beside the SDK's own MemorySession, each in real run()s of one agent
// with a model written here (no network): the same items, the same model inputs, and
// popItem and clearSession behaving the same.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Agent, MemorySession, run, setTracingDisabled, tool, Usage } from "@openai/agents";
import { z } from "zod";

import { MemoryuiSession } from "../dist/openai-agents.js";
import { FAST, KEY, unique, URL } from "./support.mjs";

setTracingDisabled(true);

const TEMPERATURES = { Paris: 14, Oslo: 3 };

const getWeather = tool({ name: "get_weather", description: "The temperature in a city, in °C.",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `${city}: ${TEMPERATURES[city]} °C, light rain` });

/** Answers like a model would: a tool call for a city it was asked about, then a reply from
 * the tool's output. It records every input it was given. */
class WeatherModel {
  inputs = [];

  async getResponse(request) {
    const items = typeof request.input === "string" ? [{ role: "user", content: request.input }] : request.input;
    this.inputs.push(JSON.parse(JSON.stringify(items)));
    const n = this.inputs.length;
    const last = items[items.length - 1];
    const message = (text) => ({ id: `msg_${n}`, type: "message", role: "assistant", status: "completed",
      content: [{ type: "output_text", text }] });
    const answer = (item) => ({ usage: new Usage(), output: [item], responseId: `resp_${n}` });
    if (last.type === "function_call_result") {
      const output = typeof last.output === "string" ? last.output : last.output.text;
      return answer(message(`It is ${output} there.`));
    }
    const question = typeof last.content === "string" ? last.content : "";
    const city = Object.keys(TEMPERATURES).find((c) => question.includes(c));
    if (!city) {
      const warmest = Object.keys(TEMPERATURES).sort((a, b) => TEMPERATURES[b] - TEMPERATURES[a])[0];
      return answer(message(`${warmest} is warmer, at ${TEMPERATURES[warmest]} °C.`));
    }
    return answer({ type: "function_call", id: `fc_${n}`, callId: `call_${city}`, name: "get_weather",
      arguments: JSON.stringify({ city }), status: "completed" });
  }

  async *getStreamedResponse() {
    throw new Error("this test runs without streaming");
  }
}

async function turns(session, questions) {
  const model = new WeatherModel();
  const agent = new Agent({ name: "Weather", instructions: "Answer with the weather tool.", model,
    tools: [getWeather] });
  const outputs = [];
  for (const question of questions) outputs.push((await run(agent, question, { session })).finalOutput);
  return { outputs, inputs: model.inputs };
}

const plain = (value) => JSON.parse(JSON.stringify(value));
const QUESTIONS = ["What's the weather in Paris?", "And in Oslo?", "Which one is warmer?"];

test("three run() turns with tool calls: the same items and model inputs as MemorySession", async () => {
  const reference = new MemorySession({ sessionId: "chat-7f2" });
  const ours = new MemoryuiSession(unique("chat"), { url: URL, apiKey: KEY, retries: FAST,
    namespace: unique("ts-agents") });
  const expected = await turns(reference, QUESTIONS);
  const got = await turns(ours, QUESTIONS);
  assert.deepEqual(got.outputs, ["It is Paris: 14 °C, light rain there.", "It is Oslo: 3 °C, light rain there.",
    "Paris is warmer, at 14 °C."]);
  assert.deepEqual(got, expected);
  const items = plain(await reference.getItems());
  assert.deepEqual(await ours.getItems(), items);
  assert.deepEqual(await ours.getItems(2), plain(await reference.getItems(2)));
  assert.deepEqual(items.map((i) => i.type ?? "message"), [
    "message", "function_call", "function_call_result", "message", "message", "function_call",
    "function_call_result", "message", "message", "message"]);
  // The third turn's model saw both earlier tool results, from either session.
  assert.equal(got.inputs[got.inputs.length - 1].filter((i) => i.type === "function_call_result").length, 2);

  // What a reader of memoryui sees: a conversation of rows, the call and its result linked.
  const rows = [];
  for await (const item of ours.client.messages(ours.conversationId)) rows.push(item.message);
  assert.deepEqual(rows.map((r) => r.kind), ["user", "assistant", "tool", "assistant", "user", "assistant", "tool",
    "assistant", "user", "assistant"]);
  assert.deepEqual(rows[1].tool_calls, [{ id: "call_Paris", name: "get_weather", arguments: '{"city":"Paris"}' }]);
  assert.deepEqual([rows[2].tool_call_id, rows[2].name, rows[2].content],
    ["call_Paris", "get_weather", "Paris: 14 °C, light rain"]);
});

test("popItem and clearSession behave as MemorySession's, and the run goes on after them", async () => {
  const reference = new MemorySession({ sessionId: "chat-pop" });
  const ours = new MemoryuiSession(unique("chat-pop"), { url: URL, apiKey: KEY, retries: FAST,
    namespace: unique("ts-agents-pop") });
  for (const session of [reference, ours]) await turns(session, QUESTIONS.slice(0, 2));
  const first = ours.conversationId;
  for (let i = 0; i < 3; i++) assert.deepEqual(await ours.popItem(), plain(await reference.popItem()));
  assert.deepEqual(await ours.getItems(), plain(await reference.getItems()));
  const [expectedAfterPop, gotAfterPop] = [await turns(reference, ["Which one is warmer?"]),
    await turns(ours, ["Which one is warmer?"])];
  assert.deepEqual(gotAfterPop, expectedAfterPop);

  await reference.clearSession();
  await ours.clearSession();
  assert.deepEqual(await ours.getItems(), await reference.getItems());
  assert.deepEqual(await ours.getItems(), []);
  assert.equal(await ours.popItem(), await reference.popItem()); // both undefined: empty
  const [expected, got] = [await turns(reference, ["And in Oslo?"]), await turns(ours, ["And in Oslo?"])];
  assert.deepEqual(got, expected);
  assert.deepEqual(await ours.getItems(), plain(await reference.getItems()));
  // Nothing was destroyed: the conversation it left still holds every row, and the new one is its child.
  assert.notEqual(ours.conversationId, first);
  assert.equal((await ours.client.get(ours.conversationId)).parent_id, first);
  assert.equal((await ours.client.get(first)).message_count >= 8, true);
  // Found by its session id, where it stands now first (the generation after clearSession).
  assert.deepEqual((await ours.client.lookup({ framework: "openai-agents", id: ours.sessionId })).map((c) => c.id),
    [ours.conversationId, first]);
});
