// Projects: a key of one project works unchanged (the key implies its project), and an
// operator's all-projects key acts in the project named by `project`. The suite
// (tests/test_typescript_client.py) makes two projects, a key of the first and an
// all-projects key, and afterwards reads from the database which project each row went into.
import assert from "node:assert/strict";
import { test } from "node:test";

import { StepPersister } from "../dist/ai.js";
import { MemoryuiSessionStore } from "../dist/claude-agent-sdk.js";
import { Memoryui, NotFound, PROJECT_HEADER } from "../dist/index.js";
import { MemoryuiSession } from "../dist/openai-agents.js";
import { collect, FAST, recordingFetch, URL } from "./support.mjs";

/** {mine, other: project slugs; projectKey: a key of `mine`; allProjectsKey; namespace}. */
const PROJECTS = process.env.MEMORYUI_PROJECTS ? JSON.parse(process.env.MEMORYUI_PROJECTS) : null;
const skip = PROJECTS ? false : "MEMORYUI_PROJECTS names no projects (tests/test_typescript_client.py sets it)";
const { mine, other, projectKey, allProjectsKey, namespace } = PROJECTS ?? {};

const ofKey = (options = {}) => new Memoryui(URL, { apiKey: projectKey, retries: FAST, ...options });
const operator = (project, options = {}) => new Memoryui(URL, { apiKey: allProjectsKey, project, retries: FAST,
  ...options });

test("a project's key works unchanged and names no project", { skip }, async () => {
  const { fetch, seen } = recordingFetch();
  const mui = ofKey({ fetch });
  assert.equal(mui.project, null);
  const { conversation, created } = await mui.getOrCreate({ namespace, externalId: "same-id", title: "mine" });
  assert.ok(created);
  await mui.append(conversation.id, { kind: "user", content: "written with the project's key" });
  const listed = await collect(mui.list({ namespace }));
  assert.deepEqual(listed.map((c) => c.id), [conversation.id]);
  assert.ok(seen.every((request) => !(PROJECT_HEADER in request.headers)));
  // Naming its own project changes nothing; naming another is not found, as if it did not exist.
  assert.equal((await ofKey({ project: mine }).get(conversation.id)).id, conversation.id);
  await assert.rejects(ofKey({ project: other }).get(conversation.id), (error) => error instanceof NotFound);
});

test("an all-projects key acts in the project it names, and sees nothing of another", { skip }, async () => {
  const { conversation: ours } = await ofKey().getOrCreate({ namespace, externalId: "same-id" });
  const { fetch, seen } = recordingFetch();
  const there = operator(other, { fetch });
  assert.equal(there.project, other);
  // The same external id in another project is another conversation.
  const { conversation: theirs, created } = await there.getOrCreate({ namespace, externalId: "same-id",
    title: "other" });
  assert.ok(created && theirs.id !== ours.id);
  await there.appendBatch(theirs.id, [{ kind: "user", content: "written by the operator" },
    { kind: "assistant", content: "in the other project" }]);
  assert.deepEqual((await collect(there.list({ namespace }))).map((c) => c.id), [theirs.id]);
  await assert.rejects(there.get(ours.id), (error) => error instanceof NotFound && error.status === 404);
  assert.ok(seen.length > 0 && seen.every((request) => request.headers[PROJECT_HEADER] === other));
  // In the first project, the operator finds what the project's key wrote.
  assert.equal((await operator(mine).find({ namespace, externalId: "same-id" })).id, ours.id);
  await assert.rejects(operator("no-such-project").get(ours.id), (error) => error instanceof NotFound);
});

test("every plug takes the project: Claude Agent SDK store, OpenAI Agents session, AI SDK persister", { skip },
  async () => {
    const key = { projectKey: "-srv-app", sessionId: "plug-session" };
    const entry = { type: "user", uuid: "u1", message: { role: "user", content: "stored through a plug" } };
    // The same session through a project's key and through the operator naming the other project.
    for (const store of [
      new MemoryuiSessionStore(URL, { apiKey: projectKey, retries: FAST, namespacePrefix: `${namespace}/` }),
      new MemoryuiSessionStore(URL, { apiKey: allProjectsKey, project: other, retries: FAST,
        namespacePrefix: `${namespace}/` }),
    ]) {
      await store.append(key, [entry]);
      assert.deepEqual(await store.load(key), [entry]);
    }
    for (const options of [{ apiKey: projectKey }, { apiKey: allProjectsKey, project: other }]) {
      const session = new MemoryuiSession("plug-chat", { url: URL, namespace: `${namespace}-agents`, retries: FAST,
        ...options });
      await session.addItems([{ role: "user", content: "kept by the OpenAI Agents session" }]);
      assert.deepEqual((await session.getItems()).map((item) => item.content),
        ["kept by the OpenAI Agents session"]);
    }
    const there = operator(other);
    const { id } = await there.create({ namespace: `${namespace}-ai`, title: "AI SDK" });
    await new StepPersister(there, id).saveInput([{ role: "user", content: "kept by the AI SDK persister" }]);
    assert.equal((await collect(there.messages(id))).length, 1);
  });
