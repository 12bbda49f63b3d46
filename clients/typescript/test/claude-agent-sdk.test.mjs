// MemoryuiSessionStore against the SDK's own InMemorySessionStore: the same operations on
// both, the same observable results. The operations are the 14 contracts of the Python
// SDK's session_store_conformance, importSessionToStore of Claude Code session files
// (a compaction, a subagent with its .meta.json) and the SDK's readers over the store.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  deleteSession, foldSessionSummary, getSessionMessages, getSubagentMessages, importSessionToStore,
  InMemorySessionStore, listSessions, listSubagents, renameSession, tagSession,
} from "@anthropic-ai/claude-agent-sdk";

import { MemoryuiSessionStore } from "../dist/claude-agent-sdk.js";
import { ADMIN_KEY, FAST, recordingFetch, unique, URL } from "./support.mjs";

const ours = (options = {}) => new MemoryuiSessionStore(URL, { apiKey: ADMIN_KEY, retries: FAST,
  namespacePrefix: `${unique("ts-claude")}/`, ...options });
const theirs = () => new InMemorySessionStore();

const e = (fields) => ({ type: "x", ...fields });
const KEY = { projectKey: "proj", sessionId: "sess" };
const SUB1 = { ...KEY, subpath: "subagents/agent-1" };
const SUB2 = { ...KEY, subpath: "subagents/agent-2" };

/** An mtime as the contract states it: integer epoch milliseconds. */
const epochMs = (mtime) => (Number.isInteger(mtime) && mtime > 1e12 ? "epoch-ms" : `not epoch-ms: ${mtime}`);
const sessions = async (store, projectKey) =>
  (await store.listSessions(projectKey)).map((s) => [s.sessionId, epochMs(s.mtime)]).sort();

// Each contract runs on a fresh store and answers what can be observed of it.
const CONTRACTS = {
  "1. append then load returns the same entries in the same order": async (store) => {
    await store.append(KEY, [e({ uuid: "b", n: 1 }), e({ uuid: "a", n: 2 })]);
    return [await store.load(KEY)];
  },
  "2. load of an unknown key returns null": async (store) => {
    const before = await store.load({ projectKey: "proj", sessionId: "nope" });
    await store.append(KEY, [e({ uuid: "x", n: 1 })]);
    return [before, await store.load({ ...KEY, subpath: "nope" })];
  },
  "3. several appends keep call order": async (store) => {
    await store.append(KEY, [e({ uuid: "z", n: 1 })]);
    await store.append(KEY, [e({ uuid: "a", n: 2 }), e({ uuid: "m", n: 3 })]);
    await store.append(KEY, [e({ uuid: "b", n: 4 })]);
    return [await store.load(KEY)];
  },
  "4. append([]) is a no-op": async (store) => {
    await store.append(KEY, [e({ uuid: "a", n: 1 })]);
    await store.append(KEY, []);
    return [await store.load(KEY)];
  },
  "5. subpath keys are stored apart from the main transcript": async (store) => {
    await store.append(KEY, [e({ uuid: "m", n: 1 })]);
    await store.append(SUB1, [e({ uuid: "s", n: 1 })]);
    return [await store.load(KEY), await store.load(SUB1)];
  },
  "6. project keys are isolated": async (store) => {
    await store.append({ projectKey: "A", sessionId: "s1" }, [e({ from: "A" })]);
    await store.append({ projectKey: "B", sessionId: "s1" }, [e({ from: "B" })]);
    return [await store.load({ projectKey: "A", sessionId: "s1" }), await store.load({ projectKey: "B",
      sessionId: "s1" }), await sessions(store, "A"), await sessions(store, "B")];
  },
  "7. listSessions answers the project's sessions with epoch-ms mtimes": async (store) => {
    await store.append({ projectKey: "proj", sessionId: "a" }, [e({ n: 1 })]);
    await store.append({ projectKey: "proj", sessionId: "b" }, [e({ n: 1 })]);
    await store.append({ projectKey: "other", sessionId: "c" }, [e({ n: 1 })]);
    return [await sessions(store, "proj"), await sessions(store, "never-appended-project")];
  },
  "8. listSessions leaves subagent transcripts out": async (store) => {
    await store.append({ projectKey: "proj", sessionId: "main" }, [e({ n: 1 })]);
    await store.append({ projectKey: "proj", sessionId: "main", subpath: "subagents/agent-1" }, [e({ n: 1 })]);
    return [await sessions(store, "proj")];
  },
  "9. delete, then load returns null": async (store) => {
    await store.delete({ projectKey: "proj", sessionId: "never-written" });
    await store.append(KEY, [e({ n: 1 })]);
    await store.delete(KEY);
    return [await store.load(KEY)];
  },
  "10. deleting a session deletes its subagent transcripts, nothing else": async (store) => {
    const other = { projectKey: "proj", sessionId: "sess2" };
    const otherProject = { projectKey: "other-proj", sessionId: KEY.sessionId };
    for (const key of [KEY, SUB1, SUB2, other, otherProject]) await store.append(key, [e({ n: 1 })]);
    await store.delete(KEY);
    return [await store.load(KEY), await store.load(SUB1), await store.load(SUB2), await store.load(other),
      await store.load(otherProject), await store.listSubkeys(KEY), await sessions(store, "proj")];
  },
  "11. deleting a subpath deletes only that transcript": async (store) => {
    for (const key of [KEY, SUB1, SUB2]) await store.append(key, [e({ n: 1 })]);
    await store.delete(SUB1);
    return [await store.load(SUB1), await store.load(SUB2), await store.load(KEY), await store.listSubkeys(KEY)];
  },
  "12. listSubkeys answers a session's subpaths": async (store) => {
    await store.append(KEY, [e({ n: 1 })]);
    await store.append(SUB1, [e({ n: 1 })]);
    await store.append(SUB2, [e({ n: 1 })]);
    await store.append({ projectKey: "proj", sessionId: "other-sess", subpath: "subagents/agent-x" }, [e({ n: 1 })]);
    return [(await store.listSubkeys(KEY)).sort()];
  },
  "13. listSubkeys leaves the main transcript out": async (store) => {
    await store.append(KEY, [e({ n: 1 })]);
    return [await store.listSubkeys(KEY), await store.listSubkeys({ projectKey: "proj", sessionId: "never" })];
  },
  "14. listSessionSummaries answers the fold, which folds on; subagents leave it alone": async (store) => {
    const key = { projectKey: "proj", sessionId: "summ-sess" };
    await store.append(key, [e({ timestamp: "2024-01-01T00:00:00.000Z", customTitle: "first" }),
      e({ timestamp: "2024-01-01T00:00:01.000Z" })]);
    await store.append(key, [e({ timestamp: "2024-01-01T00:00:02.000Z", customTitle: "second" })]);
    await store.append({ projectKey: "other", sessionId: "elsewhere" }, [e({ timestamp: "2024-01-01T00:00:00.000Z" })]);
    const [summary, ...more] = await store.listSessionSummaries("proj");
    const listed = Object.fromEntries((await store.listSessions("proj")).map((s) => [s.sessionId, s.mtime]));
    const refolded = foldSessionSummary(summary, key, [e({ timestamp: "2024-01-01T00:00:03.000Z" })]);
    await store.append({ ...key, subpath: "subagents/agent-1" },
      [e({ timestamp: "2024-01-01T00:00:09.000Z", customTitle: "subagent" })]);
    const afterSubagent = await store.listSessionSummaries("proj");
    const observed = [more, summary.sessionId, epochMs(summary.mtime), summary.mtime >= listed["summ-sess"],
      summary.data, refolded.sessionId, refolded.mtime === summary.mtime, refolded.data,
      afterSubagent.map((s) => s.data), await store.listSessionSummaries("never-appended-project")];
    await store.delete(key);
    return [...observed, await store.listSessionSummaries("proj")];
  },
};

describe("the 14 SessionStore contracts, side by side with InMemorySessionStore", () => {
  for (const [name, contract] of Object.entries(CONTRACTS)) {
    test(name, async () => {
      const expected = await contract(theirs());
      assert.deepEqual(await contract(ours()), expected);
    });
  }
});

const CONFIG = process.env.CLAUDE_CONFIG_DIR;
const SAMPLE = JSON.parse(process.env.MEMORYUI_CLAUDE_SAMPLE ?? "{}");

/** What the SDK and a reader can see of an imported session in a store. */
async function observe(store, { sessionId, dir, projectKey, agentId }) {
  const key = { projectKey, sessionId };
  const listed = await listSessions({ dir, sessionStore: store });
  return {
    main: await store.load(key),
    subkeys: await store.listSubkeys(key),
    subagents: await Promise.all((await store.listSubkeys(key)).map((subpath) => store.load({ ...key, subpath }))),
    sessions: (await store.listSessions(projectKey)).map((s) => s.sessionId),
    summaries: (await store.listSessionSummaries(projectKey)).map((s) => [s.sessionId, s.data]),
    // The SDK's readers over the store (lastModified is each store's own clock).
    listed: listed.map(({ lastModified, ...info }) => [info, epochMs(lastModified)]),
    messages: await getSessionMessages(sessionId, { dir, sessionStore: store }),
    agents: await listSubagents(sessionId, { dir, sessionStore: store }),
    agentMessages: await getSubagentMessages(sessionId, agentId, { dir, sessionStore: store }),
  };
}

describe("importSessionToStore of Claude Code session files, read back by the SDK's readers", () => {
  test("the session with its compaction and subagent reads the same from both stores", { skip: !CONFIG }, async () => {
    const options = { dir: SAMPLE.dir, batchSize: 4 };
    const reference = theirs();
    await importSessionToStore(SAMPLE.sessionId, reference, options);
    const store = ours({ namespacePrefix: SAMPLE.namespacePrefix }); // the suite reads it from the database
    await importSessionToStore(SAMPLE.sessionId, store, options);
    const expected = await observe(reference, SAMPLE);
    assert.equal(expected.agents.length, 1);
    assert.ok(expected.messages.length >= 2, `messages: ${expected.messages.length}`);
    assert.ok(expected.agentMessages.length > 0, `subagent messages: ${expected.agentMessages.length}`);
    const got = await observe(store, SAMPLE);
    assert.deepEqual(got, expected);

    // Imported again (smaller batches): no entry with a uuid is stored twice (entries
    // without one, like titles, are appended again, as the SDK's contract says).
    await importSessionToStore(SAMPLE.sessionId, store, { ...options, batchSize: 7 });
    const again = await store.load({ projectKey: SAMPLE.projectKey, sessionId: SAMPLE.sessionId });
    const uuids = (entries) => entries.filter((entry) => entry.uuid).map((entry) => entry.uuid);
    assert.deepEqual(uuids(again), uuids(expected.main));
    assert.deepEqual((await observe(store, SAMPLE)).messages, expected.messages);

    // The SDK's own writers through the store: a new title and a tag, the same on both.
    for (const target of [reference, store]) {
      await renameSession(SAMPLE.sessionId, "Discount lines break the invoice export", { dir: SAMPLE.dir,
        sessionStore: target });
      await tagSession(SAMPLE.sessionId, "billing", { dir: SAMPLE.dir, sessionStore: target });
    }
    const titled = (info) => info.listed.map(([{ sessionId, customTitle, tag }]) => [sessionId, customTitle, tag]);
    const renamed = titled(await observe(reference, SAMPLE));
    assert.deepEqual(renamed, [[SAMPLE.sessionId, "Discount lines break the invoice export", "billing"]]);
    assert.deepEqual(titled(await observe(store, SAMPLE)), renamed);
  });

  test("a second session file (the importer's fixture) reads the same too", { skip: !CONFIG }, async () => {
    const fixture = SAMPLE.fixture;
    const reference = theirs();
    const store = ours();
    for (const target of [reference, store]) await importSessionToStore(fixture.sessionId, target, { dir: fixture.dir });
    const key = { projectKey: fixture.projectKey, sessionId: fixture.sessionId };
    assert.deepEqual(await store.load(key), await reference.load(key));
    assert.deepEqual(await getSessionMessages(fixture.sessionId, { dir: fixture.dir, sessionStore: store }),
      await getSessionMessages(fixture.sessionId, { dir: fixture.dir, sessionStore: reference }));
    // deleteSession through the store: gone from both.
    for (const target of [reference, store]) await deleteSession(fixture.sessionId, { dir: fixture.dir, sessionStore: target });
    assert.equal(await store.load(key), await reference.load(key));
    assert.equal(await store.load(key), null);
  });
});

test("a batch whose answers are lost is stored once, also when the SDK sends it again", async () => {
  const { fetch, seen } = recordingFetch({ dropAnswers: 3 });
  const store = ours({ fetch, retries: { attempts: 2, backoff: 0.01 } });
  const key = { projectKey: "proj", sessionId: "s-retry" };
  const batch = [e({ type: "user", uuid: "u1", message: { role: "user", content: "hello" } }),
    { type: "mode", mode: "plan" }, // no uuid: only the idempotency key keeps it single
    e({ type: "assistant", uuid: "a1", parentUuid: "u1", message: { role: "assistant",
      content: [{ type: "text", text: "hi" }] } })];
  // Two answers lost: our retries run out and the SDK gets an error …
  await assert.rejects(store.append(key, batch), { name: "TransportError" });
  // … so the SDK calls append again with the same batch (its own retry); one more answer is lost.
  await store.append(key, batch);
  await store.append(key, [{ type: "mode", mode: "plan" }]); // the same entry again, now on purpose
  assert.deepEqual(await store.load(key), [...batch, { type: "mode", mode: "plan" }]);
  const keys = seen.filter((r) => r.method === "POST").slice(0, 4).map((r) => r.headers["Idempotency-Key"]);
  assert.equal(new Set(keys).size, 1);
});

test("two stores writing one session keep each other's entries and summary", async () => {
  const namespacePrefix = `${unique("ts-claude-two")}/`;
  const [first, second] = [ours({ namespacePrefix }), ours({ namespacePrefix })];
  const key = { projectKey: "proj", sessionId: "s-two" };
  const reference = theirs();
  const batches = [
    [first, [e({ uuid: "u1", timestamp: "2026-01-01T00:00:00.000Z", customTitle: "first title" })]],
    [second, [e({ uuid: "u2", timestamp: "2026-01-01T00:00:01.000Z" })]],
    [first, [e({ uuid: "u3", timestamp: "2026-01-01T00:00:02.000Z", customTitle: "last title" })]],
  ];
  for (const [store, entries] of batches) {
    await store.append(key, entries);
    await reference.append(key, entries);
  }
  assert.deepEqual(await second.load(key), await reference.load(key));
  assert.deepEqual((await first.listSessionSummaries("proj")).map((s) => s.data),
    (await reference.listSessionSummaries("proj")).map((s) => s.data));
});

test("entries that are not JSON objects are taken as InMemorySessionStore takes them", async () => {
  const key = { projectKey: "proj", sessionId: "s-lines" };
  const batch = [e({ type: "user", uuid: "u1", message: { role: "user", content: "hello" } }), 42, "a bare string",
    [1, 2], true, e({ type: "assistant", uuid: "a1", parentUuid: "u1", message: { role: "assistant",
      content: [{ type: "text", text: "hi" }] } })];
  const [store, reference] = [ours(), theirs()];
  for (const target of [store, reference]) {
    await target.append(key, batch);
    await target.append(key, ["more", { type: "mode", mode: "plan" }]);
  }
  assert.deepEqual(await store.load(key), await reference.load(key));
});

test("a transcript file with lines that are not JSON objects imports as into InMemorySessionStore", { skip: !CONFIG },
  async () => {
    const { mkdirSync, writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const sessionId = "0b8a3c1e-5d2f-4a6b-9c7d-8e9f0a1b2c3d";
    const folder = join(process.env.CLAUDE_CONFIG_DIR, "projects", "-srv-lines");
    mkdirSync(folder, { recursive: true });
    const lines = [{ type: "user", uuid: "u1", sessionId, timestamp: "2026-01-01T00:00:00.000Z", cwd: "/srv/lines",
      message: { role: "user", content: "Why?" } }, 7, "text", [1], { type: "assistant", uuid: "a1", parentUuid: "u1",
      sessionId, timestamp: "2026-01-01T00:00:01.000Z", message: { role: "assistant", content: [
        { type: "text", text: "Because." }] } }];
    writeFileSync(join(folder, `${sessionId}.jsonl`), `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`);
    const [store, reference] = [ours(), theirs()];
    for (const target of [store, reference]) await importSessionToStore(sessionId, target, { dir: "/srv/lines" });
    const key = { projectKey: "-srv-lines", sessionId };
    assert.deepEqual(await store.load(key), await reference.load(key));
    assert.deepEqual(await getSessionMessages(sessionId, { dir: "/srv/lines", sessionStore: store }),
      await getSessionMessages(sessionId, { dir: "/srv/lines", sessionStore: reference }));
  });
