// The Vercel AI SDK: ModelMessages to memoryui rows and back, and StepPersister keeping
// each step of generateText / streamText runs driven by the SDK's own mock model (ai/test).
import assert from "node:assert/strict";
import { test } from "node:test";

import { generateText, jsonSchema, modelMessageSchema, simulateReadableStream, stepCountIs, streamText, tool }
  from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { StepPersister, toMemoryuiMessages, toModelMessages } from "../dist/ai.js";
import { client, collect, recordingFetch, unique, URL, KEY } from "./support.mjs";
import { Memoryui } from "../dist/index.js";

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 } };
const finish = (unified) => ({ unified, raw: unified });

/** Plain JSON of messages (URL objects as their text), to compare what went with what came back. */
const plain = (value) => JSON.parse(JSON.stringify(value));

const PNG = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13]);

const CONVERSATION = [
  { role: "system", content: "You are the billing assistant." },
  { role: "user", content: [
    { type: "text", text: "Why was invoice 7713 charged twice? Here is the screenshot and the PDF." },
    { type: "image", image: new globalThis.URL("https://example.com/screens/7713.png") },
    { type: "image", image: PNG, mediaType: "image/png" },
    { type: "file", data: new globalThis.URL("https://example.com/invoices/7713.pdf"), mediaType: "application/pdf",
      filename: "7713.pdf" },
  ] },
  { role: "assistant", content: [
    { type: "reasoning", text: "Two charges: look at the payments and the refunds." },
    { type: "text", text: "Let me look at the payments and refunds." },
    { type: "tool-call", toolCallId: "call_pay", toolName: "payments", input: { invoice: 7713 } },
    { type: "tool-call", toolCallId: "call_ref", toolName: "refunds", input: { invoice: 7713 } },
  ] },
  { role: "tool", content: [
    { type: "tool-result", toolCallId: "call_pay", toolName: "payments",
      output: { type: "json", value: { charges: [{ id: "ch_1", amount: 42.5 }, { id: "ch_2", amount: 42.5 }] } } },
    { type: "tool-result", toolCallId: "call_ref", toolName: "refunds",
      output: { type: "error-text", value: "refund service timed out" } },
  ] },
  { role: "assistant", content: [
    { type: "tool-call", toolCallId: "call_refund", toolName: "refund", input: { charge: "ch_2" } },
  ] },
  { role: "tool", content: [
    { type: "tool-result", toolCallId: "call_refund", toolName: "refund",
      output: { type: "execution-denied", reason: "needs a person's approval" } },
  ] },
  { role: "assistant", content: [
    { type: "tool-call", toolCallId: "call_receipt", toolName: "receipt", input: { charge: "ch_1" } },
  ] },
  { role: "tool", content: [
    { type: "tool-result", toolCallId: "call_receipt", toolName: "receipt", output: { type: "content", value: [
      { type: "text", text: "Receipt for ch_1" },
      { type: "image-url", url: "https://example.com/receipts/ch_1.png" },
    ] } },
  ] },
  { role: "assistant", content: [{ type: "text", text: "ch_2 is a duplicate; a person must approve its refund." }] },
];

test("ModelMessages become rows and come back from the active view as they went", async () => {
  for (const message of CONVERSATION) modelMessageSchema.parse(message); // the SDK's own validator
  const rows = toMemoryuiMessages(CONVERSATION);
  assert.deepEqual(rows.map((r) => r.kind), ["system", "user", "thought", "assistant", "tool", "tool", "assistant",
    "tool", "assistant", "tool", "assistant"]);
  const user = rows[1].content;
  assert.deepEqual(user[1], { type: "image", source: { type: "url", url: "https://example.com/screens/7713.png" } });
  assert.equal(user[2].source.data, Buffer.from(PNG).toString("base64"));
  assert.deepEqual(user[3], { type: "file_ref", media_type: "application/pdf",
    url: "https://example.com/invoices/7713.pdf", filename: "7713.pdf" });
  assert.deepEqual(rows[3].tool_calls, [{ id: "call_pay", name: "payments", arguments: { invoice: 7713 } },
    { id: "call_ref", name: "refunds", arguments: { invoice: 7713 } }]);
  assert.equal(rows[5].is_error, true);

  const mui = client();
  const { id } = await mui.create({ namespace: unique("ts-ai"), title: "Invoice 7713 charged twice" });
  await mui.appendBatch(id, rows); // the server validates every row
  const back = toModelMessages(await mui.active(id));
  for (const message of back) modelMessageSchema.parse(message);
  const expected = plain(CONVERSATION);
  expected[1].content[2] = { type: "image", image: Buffer.from(PNG).toString("base64"), mediaType: "image/png" };
  assert.deepEqual(plain(back), expected);
});

test("a fold's summary comes first, and a call without its result gets an error result", async () => {
  const mui = client();
  const { id } = await mui.create({ namespace: unique("ts-ai-fold") });
  await mui.appendBatch(id, toMemoryuiMessages([
    { role: "user", content: "Refund order 7." }, { role: "assistant", content: "Done." },
    { role: "user", content: "And order 8?" },
    { role: "assistant", content: [{ type: "tool-call", toolCallId: "c8", toolName: "refund", input: { order: 8 } }] },
  ]));
  await mui.checkpoint(id, { position: 1, summary: "Order 7 was refunded." });
  const back = toModelMessages(await mui.active(id));
  assert.deepEqual(plain(back), [
    { role: "system", content: "Order 7 was refunded." },
    { role: "user", content: "And order 8?" },
    { role: "assistant", content: [{ type: "tool-call", toolCallId: "c8", toolName: "refund", input: { order: 8 } }] },
    { role: "tool", content: [{ type: "tool-result", toolCallId: "c8", toolName: "refund",
      output: { type: "error-text", value: "(no result was recorded for this call)" } }] },
  ]);
});

function weatherModel() {
  return new MockLanguageModelV3({ doGenerate: [
    { content: [{ type: "reasoning", text: "The user wants the weather; call the tool." },
      { type: "text", text: "Checking the weather." },
      { type: "tool-call", toolCallId: "call_w1", toolName: "weather", input: JSON.stringify({ city: "Oslo" }) }],
      finishReason: finish("tool-calls"), usage, warnings: [] },
    { content: [{ type: "text", text: "It is 4 °C and raining in Oslo." }], finishReason: finish("stop"), usage,
      warnings: [] },
    { content: [{ type: "text", text: "You asked about Oslo: 4 °C and rain." }], finishReason: finish("stop"), usage,
      warnings: [] },
  ] });
}

const weather = tool({ description: "The weather in a city",
  inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
  execute: async ({ city }) => ({ city, celsius: 4, sky: "rain" }) });

test("generateText with the mock model: each step is kept as it finishes, and the run continues from memory", async () => {
  const mui = client();
  const { id } = await mui.create({ namespace: unique("ts-ai-run"), title: "Weather in Oslo" });
  const memory = new StepPersister(mui, id);
  const model = weatherModel();
  const input = [{ role: "user", content: "What is the weather in Oslo?" }];
  await memory.saveInput(input);
  const kept = [];
  const result = await generateText({ model, messages: input, tools: { weather }, stopWhen: stepCountIs(3),
    onStepFinish: async (step) => {
      await memory.onStepFinish(step);
      kept.push((await collect(mui.messages(id))).length); // stored before the next model call
    } });
  assert.equal(result.text, "It is 4 °C and raining in Oslo.");
  assert.deepEqual(kept, [4, 5]);
  const rows = (await collect(mui.messages(id))).map((item) => item.message);
  assert.deepEqual(rows.map((r) => r.kind), ["user", "thought", "assistant", "tool", "assistant"]);
  assert.deepEqual(rows[2].tool_calls, [{ id: "call_w1", name: "weather", arguments: { city: "Oslo" } }]);
  assert.equal(rows[3].content, '{"city": "Oslo", "celsius": 4, "sky": "rain"}');

  // What memoryui gives back is the run's own transcript, and a valid prompt for the next run.
  const remembered = toModelMessages(await mui.active(id));
  assert.deepEqual(plain(remembered), plain([...input, ...result.response.messages]).map(({ id: _, ...m }) => m));
  const next = await generateText({ model, messages: [...remembered, { role: "user", content: "Say it again." }] });
  assert.equal(next.text, "You asked about Oslo: 4 °C and rain.");
  const prompt = model.doGenerateCalls[2].prompt;
  assert.deepEqual(prompt.map((m) => m.role), ["user", "assistant", "tool", "assistant", "user"]);
  assert.deepEqual(prompt[1].content.map((p) => p.type), ["reasoning", "text", "tool-call"]);
});

test("streamText with the mock model: onFinish alone keeps the whole run, once", async () => {
  const model = new MockLanguageModelV3({ doStream: async () => ({ stream: simulateReadableStream({ chunks: [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t1" },
    { type: "text-delta", id: "t1", delta: "Refunds take " },
    { type: "text-delta", id: "t1", delta: "3 to 5 days." },
    { type: "text-end", id: "t1" },
    { type: "finish", finishReason: finish("stop"), usage },
  ] }) }) });
  const { fetch, seen } = recordingFetch({ dropAnswers: 1 }); // the batch's first answer is lost
  const mui = new Memoryui(URL, { apiKey: KEY, fetch, retries: { attempts: 3, backoff: 0.01 } });
  const { id } = await client().create({ namespace: unique("ts-ai-stream") });
  const memory = new StepPersister(mui, id);
  let finished;
  const done = new Promise((resolve) => { finished = resolve; });
  const result = streamText({ model, prompt: "How long do refunds take?", onFinish: async (event) => {
    await memory.onFinish(event);
    finished();
  } });
  assert.equal(await result.text, "Refunds take 3 to 5 days.");
  await done;
  const rows = (await collect(mui.messages(id))).map((item) => item.message);
  assert.deepEqual(rows, [{ kind: "assistant", content: "Refunds take 3 to 5 days." }]);
  const keys = seen.filter((r) => r.method === "POST").map((r) => r.headers["Idempotency-Key"]);
  assert.equal(keys.length, 2);
  assert.equal(new Set(keys).size, 1);
});

test("one persister kept for a conversation's next runs keeps each run, even one that says the same", async () => {
  const reply = { content: [{ type: "text", text: "3 to 5 days." }], finishReason: finish("stop"), warnings: [],
    usage };
  const model = new MockLanguageModelV3({ doGenerate: async () => reply });
  const mui = client();
  const { id } = await mui.create({ namespace: unique("ts-ai-runs") });
  const memory = new StepPersister(mui, id); // one per conversation, as the README makes it
  for (const ask of ["How long does a refund take?", "And a refund to a card?", "And a refund to a card?"]) {
    await memory.saveInput([{ role: "user", content: ask }]);
    await generateText({ model, messages: toModelMessages(await mui.active(id)), onStepFinish: memory.onStepFinish,
      onFinish: memory.onFinish });
  }
  // onFinish alone (no step callback), twice with the same answer.
  const alone = new StepPersister(mui, id);
  for (let n = 0; n < 2; n += 1) await generateText({ model, prompt: "Again?", onFinish: alone.onFinish });
  const rows = (await collect(mui.messages(id))).map((item) => item.message);
  assert.deepEqual(rows.map((r) => `${r.kind}: ${r.content}`), [
    "user: How long does a refund take?", "assistant: 3 to 5 days.",
    "user: And a refund to a card?", "assistant: 3 to 5 days.",
    "user: And a refund to a card?", "assistant: 3 to 5 days.",
    "assistant: 3 to 5 days.", "assistant: 3 to 5 days."]);
});
