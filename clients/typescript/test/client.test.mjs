// The fetch client against the live server: every operation, typed errors, the retry
// policy and its Idempotency-Key, and Unencodable before anything is sent.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  BadRequest, CheckpointSplitsToolCall, Forbidden, IdempotencyKeyReused, InvalidInput, Memoryui, NotFound, PositionConflict,
  RateLimited, Retries, ServerError, TransportError, Unauthenticated, Unencodable,
} from "../dist/index.js";
import { ADMIN_KEY, client, collect, FAST, jsonAnswer, KEY, recordingFetch, unique, URL } from "./support.mjs";

test("the whole loop: conversations, messages, folds, forks, export, search, facts", async () => {
  const mui = client();
  const namespace = unique("ts-loop");
  const { conversation, created } = await mui.getOrCreate({ namespace, externalId: "session-1", title: "Refund",
    subject: "customer:ts-42" });
  const again = await mui.getOrCreate({ namespace, externalId: "session-1" });
  assert.ok(created && !again.created && again.conversation.id === conversation.id);
  assert.equal((await mui.find({ namespace, externalId: "session-1" })).id, conversation.id);
  assert.equal(await mui.find({ namespace, externalId: "nope" }), null);
  const cid = conversation.id;

  assert.equal((await mui.append(cid, { kind: "user", content: "Where is my refund, order 7713?" },
    { expectedPosition: 0 })).position, 0);
  const batch = await mui.appendBatch(cid, [
    { kind: "assistant", content: "Checking.", tool_calls: [{ id: "c1", name: "status", arguments: {} }] },
    { kind: "tool", tool_call_id: "c1", content: "refunded" },
    { kind: "note", text: "polite customer" },
  ]);
  assert.deepEqual([batch.first_position, batch.last_position, batch.count], [1, 3, 3]);
  assert.deepEqual((await collect(mui.messages(cid, { pageSize: 2 }))).map((m) => m.position), [0, 1, 2, 3]);
  assert.deepEqual((await collect(mui.messages(cid, { after: 1 }))).map((m) => m.position), [2, 3]);

  await assert.rejects(mui.checkpoint(cid, { position: 1, summary: "Asked about a refund; checking." }),
    (error) => error instanceof CheckpointSplitsToolCall && error.status === 409
      && error.message.includes("0 (before) and 2 (after)"));
  await mui.checkpoint(cid, { position: 2, summary: "Customer asked about a refund; it was refunded." });
  const view = await mui.active(cid);
  assert.ok(view.handoff.content.startsWith("Customer asked"));
  assert.deepEqual(view.items.map((i) => i.position), [3]);

  const child = await mui.fork(cid, { position: 2, title: "branch", externalId: "session-1-b" });
  assert.equal(child.parent_id, cid);
  assert.equal((await mui.get(child.id)).message_count, 3);

  for (let i = 0; i < 3; i++) await mui.create({ title: `filler ${i}`, namespace });
  const listed = await collect(mui.list({ namespace, pageSize: 2 }));
  assert.equal(new Set(listed.map((c) => c.id)).size, 5);

  const jsonl = await (await mui.export(cid, { format: "jsonl" })).text();
  assert.ok(jsonl.split("\n").some((line) => line.includes('"refunded"')));
  assert.equal((await (await mui.export(cid, { format: "json" })).json()).conversation.id, cid);

  const hits = await mui.search({ q: "7713", conversation: cid });
  assert.deepEqual(hits.items.map((hit) => hit.position), [0]);

  const fact = await mui.proposeFact({ subject: "customer:ts-42", text: "Prefers email over phone.", importance: 4,
    source_conversation_id: cid, source_position: 0 });
  assert.equal(fact.status, "proposed");
  assert.deepEqual(await mui.recall({ subject: "customer:ts-42" }), []); // a person has not approved it yet

  await client({ apiKey: ADMIN_KEY }).delete(child.id);
  await assert.rejects(mui.get(child.id), (error) => error instanceof NotFound && error.code === "not_found"
    && error.status === 404);
});

test("task state and the actions ledger", async () => {
  const mui = client();
  const namespace = unique("ts-ledger");
  const { id } = await mui.create({ namespace });
  const state = await mui.state(id);
  const written = await mui.setState(id, { order: 7713, step: "refund" }, { expectedVersion: state.version });
  assert.equal(written.version, state.version + 1);
  assert.deepEqual((await mui.state(id)).state, { order: 7713, step: "refund" });
  await assert.rejects(mui.setState(id, { step: "late" }, { expectedVersion: state.version }),
    (error) => error.status === 409 && error.code === "version_conflict");

  const key = unique("refund-7713");
  const first = await mui.recordAction(id, { key, name: "refund", arguments: { order: 7713 }, result: { ok: true } });
  const second = await mui.recordAction(id, { key, name: "refund", arguments: { order: 7713 } });
  assert.deepEqual([first.status, second.status], ["performed", "already_performed"]);
  const found = await mui.findAction(key, { namespace });
  assert.equal(found.performed, true);

  await mui.append(id, { kind: "user", content: "Refund order 7713." });
  const commit = "3f1c2a9e8d4b4c619a570b7e6f2d1c883f1c2a9e";
  const snapshot = await mui.recordSnapshot(id, { position: 0, repo: "/srv/shop", commit, files_changed: 2,
    insertions: 10, deletions: 1 });
  assert.deepEqual([snapshot.position, snapshot.commit, snapshot.files_changed], [0, commit, 2]);
});

test("an imported transcript becomes a conversation", async () => {
  const mui = client();
  const namespace = unique("ts-import");
  const content = [
    { role: "user", content: "Import me." }, { role: "assistant", content: "Imported." },
  ].map((line) => JSON.stringify(line)).join("\n");
  const answer = await mui.importTranscript({ format: "openai-chat", content, namespace });
  assert.ok(answer.created && answer.conversation_id, JSON.stringify(answer));
  const rows = await collect(mui.messages(answer.conversation_id));
  assert.deepEqual(rows.map((r) => r.kind), ["user", "assistant"]);
});

test("API errors are typed, carry code and field, and are never retried", async () => {
  const { fetch, seen } = recordingFetch();
  const mui = new Memoryui(URL, { apiKey: KEY, retries: FAST, fetch });
  const { id } = await mui.create();
  const before = seen.length;
  const conflict = await mui.append(id, { kind: "user", content: "late" }, { expectedPosition: 3 }).catch((e) => e);
  const invalid = await mui.appendBatch(id, [{ kind: "user", content: "ok" }, { kind: "tool", content: "x" }])
    .catch((e) => e);
  const forbidden = await mui.delete(id).catch((e) => e); // the key has no admin scope
  await mui.append(id, { kind: "user", content: "a" }, { idempotencyKey: `mine-${id}` });
  const reused = await mui.append(id, { kind: "user", content: "b" }, { idempotencyKey: `mine-${id}` })
    .catch((e) => e);
  assert.equal(seen.length - before, 5); // one request each
  assert.ok(conflict instanceof PositionConflict);
  assert.deepEqual([conflict.code, conflict.field], ["position_conflict", "expected_position"]);
  assert.ok(invalid instanceof InvalidInput);
  assert.deepEqual([invalid.code, invalid.field], ["invalid_message", "messages.1.tool_call_id"]);
  assert.ok(forbidden instanceof Forbidden);
  assert.ok(reused instanceof IdempotencyKeyReused && reused.field === "Idempotency-Key");
  const stranger = new Memoryui(URL, { apiKey: "mui_not-a-key", retries: FAST });
  await assert.rejects(stranger.create(), Unauthenticated);
});

test("a lost answer after the commit is retried with the same key and stored once", async () => {
  const { fetch, seen } = recordingFetch({ dropAnswers: 2 });
  const mui = new Memoryui(URL, { apiKey: KEY, retries: FAST, fetch });
  const namespace = unique("ts-retry");
  const conversation = await mui.create({ namespace, externalId: "lost-answers" }); // two answers lost
  const writes = seen.filter((r) => r.method === "POST");
  assert.equal(writes.length, 3);
  assert.equal(new Set(writes.map((r) => r.headers["Idempotency-Key"])).size, 1);
  const before = seen.length;
  const { fetch: fetch2 } = recordingFetch({ dropAnswers: 1 });
  const again = new Memoryui(URL, { apiKey: KEY, retries: FAST, fetch: fetch2 });
  await again.appendBatch(conversation.id, [{ kind: "user", content: "once" }, { kind: "assistant", content: "ok" }]);
  assert.equal(before, seen.length);
  const rows = await collect(mui.messages(conversation.id));
  assert.deepEqual(rows.map((r) => r.message.content), ["once", "ok"]);
  assert.equal((await collect(mui.list({ namespace }))).length, 1);
  // Each write gets a new key of its own unless one is given.
  await mui.append(conversation.id, { kind: "user", content: "one" });
  await mui.append(conversation.id, { kind: "user", content: "two" });
  const keys = seen.filter((r) => r.method === "POST").slice(-2).map((r) => r.headers["Idempotency-Key"]);
  assert.ok(keys[0] !== keys[1] && keys.every((k) => /^mui-[0-9a-f-]{36}$/.test(k)));
});

test("busy answers are retried honouring Retry-After, with one key; other errors are not", async () => {
  for (const status of [429, 502, 503, 504]) {
    const waits = [];
    const { fetch, seen } = recordingFetch({ script: [
      jsonAnswer(status, { error: { code: "busy", message: "busy" } }, { "Retry-After": "7" }),
      jsonAnswer(status, { error: { code: "busy", message: "busy" } }),
    ] });
    const mui = new Memoryui(URL, { apiKey: KEY, fetch, sleep: async (s) => { waits.push(s); },
      retries: new Retries({ attempts: 5, backoff: 0.25 }) });
    const created = await mui.create({ title: `after ${status}` });
    assert.equal(created.title, `after ${status}`);
    assert.equal(waits[0], 7);
    assert.ok(waits[1] >= 0.125 && waits[1] <= 0.5, String(waits[1]));
    assert.equal(new Set(seen.map((r) => r.headers["Idempotency-Key"])).size, 1);
  }
  // A conflict that says when to come back (an import in progress) passes; one without Retry-After does not.
  const waits = [];
  const { fetch } = recordingFetch({ script: [
    jsonAnswer(409, { error: { code: "import_in_progress", message: "wait" } }, { "Retry-After": "2" }),
  ] });
  const mui = new Memoryui(URL, { apiKey: KEY, fetch, sleep: async (s) => { waits.push(s); } });
  await mui.create();
  assert.deepEqual(waits, [2]);
  for (const [status, Class] of [[400, BadRequest], [404, NotFound], [422, InvalidInput], [500, ServerError]]) {
    const { fetch: once, seen } = recordingFetch({ script: [jsonAnswer(status, { error: { code: "x", message: "no",
      field: "title" } })] });
    const error = await new Memoryui(URL, { apiKey: KEY, fetch: once, retries: FAST }).create().catch((e) => e);
    assert.ok(error instanceof Class && error.status === status && error.field === "title");
    assert.equal(seen.length, 1);
  }
  // Busy until the retries run out: the typed error of the last answer.
  const busy = () => jsonAnswer(429, { error: { code: "rate_limited", message: "slow down" } });
  const { fetch: always } = recordingFetch({ script: [busy, busy, busy] });
  await assert.rejects(new Memoryui(URL, { apiKey: KEY, fetch: always, retries: FAST }).create(), RateLimited);
});

test("a server that cannot be reached is a TransportError after the retries", async () => {
  const waits = [];
  const mui = new Memoryui("http://127.0.0.1:9", { apiKey: KEY, retries: new Retries({ attempts: 3 }),
    sleep: async (s) => { waits.push(s); } });
  await assert.rejects(mui.create(), (error) => error instanceof TransportError && error.code === "transport_error");
  assert.equal(waits.length, 2);
});

test("a refused connection names the address it was for", async () => {
  const { createServer } = await import("node:net");
  const closed = createServer().listen(0, "127.0.0.1");
  await new Promise((done) => closed.once("listening", done));
  const port = closed.address().port;
  await new Promise((done) => closed.close(done)); // nothing listens there now
  const mui = new Memoryui(`http://127.0.0.1:${port}`, { apiKey: KEY, retries: new Retries({ attempts: 1 }) });
  await assert.rejects(mui.get("3f1c"), (error) => error instanceof TransportError
    && error.message.startsWith(`could not reach memoryui at http://127.0.0.1:${port}/api/v1/conversations/3f1c: `)
    && error.message.includes("ECONNREFUSED"));
});

test("without an address the client fails clearly instead of guessing one", () => {
  const saved = process.env.MEMORYUI_URL;
  delete process.env.MEMORYUI_URL;
  try {
    for (const url of [undefined, "", "  "]) {
      assert.throws(() => new Memoryui(url, { apiKey: KEY }), (error) => error instanceof TypeError
        && error.message.includes("MEMORYUI_URL"));
    }
  } finally {
    process.env.MEMORYUI_URL = saved;
  }
  assert.ok(new Memoryui(undefined, { apiKey: KEY }));  // the variable is the other way to give it
});

test("a value with no JSON form is refused before anything is sent, naming where it is", async () => {
  const { fetch, seen } = recordingFetch();
  const mui = new Memoryui(URL, { apiKey: KEY, fetch });
  const cases = [
    [{ kind: "user", content: "bad \ud800 half" }, "content"],
    [{ kind: "user", content: "x", meta: { score: NaN } }, "meta.score"],
    [{ kind: "user", content: "x", meta: { big: 10n } }, "meta.big"],
    [{ kind: "user", content: "x", meta: { when: new Map() } }, "meta.when"],
    [{ kind: "user", content: "x", meta: { list: [1, undefined] } }, "meta.list.1"],
  ];
  for (const [message, field] of cases) {
    const error = await mui.append("00000000-0000-0000-0000-000000000000", message).catch((e) => e);
    assert.ok(error instanceof Unencodable, String(error));
    assert.deepEqual([error.code, error.field], ["unencodable", field]);
  }
  const cyclic = { kind: "user", content: "x", meta: {} };
  cyclic.meta.self = cyclic.meta;
  assert.equal((await mui.append("x", cyclic).catch((e) => e)).field, "meta.self");
  assert.equal(seen.length, 0);
});
