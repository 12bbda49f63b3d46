// importFile against the live server: a file sent to POST /imports as the body itself, its
// options in the query string; a Blob from disk (Node's openAsBlob), bytes or text.
import assert from "node:assert/strict";
import { mkdtempSync, openAsBlob, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { InvalidInput } from "../dist/index.js";
import { client, collect, recordingFetch, unique } from "./support.mjs";

/** A journal file (one `{kind, text, at}` line each) no other run writes. */
const journal = (tag) => [
  { kind: "heard", text: `Customer ${tag} asks about a refund.`, at: "2025-11-03T07:01:00Z" },
  { kind: "did", text: "Looked up order 7.", at: "2025-11-03T07:01:10Z" },
  { kind: "said", text: "Your order is past the window, sorry.", at: "2025-11-03T07:02:00Z" },
].map((line) => JSON.stringify(line)).join("\n") + "\n";

function fileOf(text) {
  const path = join(mkdtempSync(join(tmpdir(), "memoryui-import-")), "journal.jsonl");
  writeFileSync(path, text);
  return path;
}

test("importFile sends a file from disk as the body, and the same file again creates nothing", async () => {
  const mui = client();
  const namespace = unique("ts-import-file");
  const path = fileOf(journal(namespace));
  const first = await mui.importFile(await openAsBlob(path), { namespace, subject: "customer:ts-7" });
  assert.equal(first.format, "journal");
  const conversation = await mui.get(first.conversation_id);
  assert.deepEqual([conversation.namespace, conversation.subject], [namespace, "customer:ts-7"]);
  const rows = await collect(mui.messages(first.conversation_id));
  assert.deepEqual(rows.map((row) => [row.kind, row.message.text]),
    [["heard", `Customer ${namespace} asks about a refund.`], ["did", "Looked up order 7."],
      ["said", "Your order is past the window, sorry."]]);

  const again = await mui.importFile(await openAsBlob(path), { namespace, subject: "customer:ts-7" });
  assert.deepEqual([again.unchanged, again.conversation_id], [true, first.conversation_id]);
  assert.equal((await collect(mui.list({ namespace }))).length, 1);
});

test("importFile puts its options in the query string: a dry run of bytes writes nothing", async () => {
  const namespace = unique("ts-import-dry");
  const { fetch, seen } = recordingFetch();
  const dry = await client({ fetch }).importFile(new TextEncoder().encode(journal(namespace)),
    { namespace, dryRun: true });
  assert.equal(dry.dry_run, true);
  const sent = new URL(seen[0].url);
  assert.deepEqual([sent.pathname.endsWith("/imports"), sent.searchParams.get("dry_run"),
    sent.searchParams.get("namespace")], [true, "true", namespace]);
  assert.equal(seen[0].headers["Content-Type"], "application/octet-stream");
  assert.deepEqual(await collect(client().list({ namespace })), []);

  await assert.rejects(client().importFile(journal(namespace), { namespace, format: "no-such-format" }),
    (error) => error instanceof InvalidInput && error.field === "format");
});

test("importFile sends the file again under the same key when an answer is lost: imported once", async () => {
  const namespace = unique("ts-import-lost");
  const path = fileOf(journal(namespace));
  const { fetch, seen } = recordingFetch({ dropAnswers: 1 });
  const answer = await client({ fetch }).importFile(await openAsBlob(path), { namespace });
  assert.equal(seen.length, 2);
  assert.equal(new Set(seen.map((s) => s.headers["Idempotency-Key"])).size, 1);
  const listed = await collect(client().list({ namespace }));
  assert.deepEqual(listed.map((c) => c.id), [answer.conversation_id]);
  assert.equal((await collect(client().messages(answer.conversation_id))).length, 3);
});
