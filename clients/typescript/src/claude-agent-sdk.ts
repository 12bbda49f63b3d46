/**
 * A Claude Agent SDK `SessionStore` kept in memoryui (`@memoryui/client/claude-agent-sdk`).
 *
 *     import { query } from "@anthropic-ai/claude-agent-sdk";
 *     import { MemoryuiSessionStore } from "@memoryui/client/claude-agent-sdk";
 *
 *     const sessionStore = new MemoryuiSessionStore("http://127.0.0.1:8000", { apiKey: "mui_…" });
 *     for await (const message of query({ prompt: "…", options: { sessionStore } })) { … }
 *
 * It behaves as the Python client's MemoryuiSessionStore, through the same endpoints, so
 * a session lands the same way from either language:
 *
 * - `projectKey` → the conversation's namespace (`namespacePrefix` + projectKey, hashed
 *   past 200 characters), `sessionId` → its external id; a `subpath` (a subagent
 *   transcript) → external id `SESSION/SUBPATH`, a child conversation marked as a subagent;
 * - entries are kept verbatim beside the rows they become (`load` returns them
 *   deep-equal); a compaction becomes a checkpoint at its place;
 * - `append` sends each batch in one request with an idempotency key derived from the
 *   key, the entry count it continues from and the entries: a retry (ours or the SDK's)
 *   stores a batch once; entries with a `uuid` are also deduplicated by the server;
 * - the session summary (`foldSessionSummary`) is folded here and stored with its batch
 *   in one transaction, conditional on the entry count: two writers never lose each
 *   other's fold (a batch another writer beat is folded again and retried for up to
 *   `conflictDeadline` seconds);
 * - `delete` goes through memoryui's deletion path, which keeps a receipt, and waits
 *   while a prune or another deletion runs.
 *
 * The key needs `read` and `write`, and `admin` for `delete`.
 */

import { foldSessionSummary } from "@anthropic-ai/claude-agent-sdk";
import type { SessionKey, SessionStore, SessionStoreEntry, SessionSummaryEntry } from "@anthropic-ai/claude-agent-sdk";

import { type ClientOptions, Memoryui } from "./client.js";
import { encodeJson } from "./core.js";
import { Conflict, NotFound } from "./errors.js";
import { NAMESPACE_MAX } from "./formats.js";
import { canonicalJson, CONFLICT_DEADLINE, ConflictBackoff, Locks, lostToAnotherWriter, sha256Hex, sleepSeconds }
  from "./sessions.js";
import type { ImportAnswer, Source } from "./types.js";

export const FORMAT = "claude-code";
// Request bodies stay well under the server's limit (twice the message limit, 2 MiB by default).
const BATCH_BYTES = 1_500_000;
const BATCH_ENTRIES = 1000;

/** The namespace of a project key: `prefix + projectKey`, or past 200 characters its first 183 and a hash. */
export async function namespaceFor(projectKey: string, prefix = ""): Promise<string> {
  const name = prefix + projectKey;
  return name.length <= NAMESPACE_MAX ? name : `${name.slice(0, NAMESPACE_MAX - 17)}-${(await sha256Hex(name)).slice(0, 16)}`;
}

function externalId(key: { sessionId: string; subpath?: string }): string {
  const { sessionId, subpath } = key;
  if (typeof sessionId !== "string" || !sessionId || sessionId.includes("/")) {
    throw new TypeError(`sessionId must be a non-empty string without '/': ${JSON.stringify(sessionId)}`);
  }
  if (subpath === undefined) return sessionId;
  if (typeof subpath !== "string" || !subpath) {
    throw new TypeError("subpath must be omitted for the main transcript, or a non-empty string");
  }
  return `${sessionId}/${subpath}`;
}

function chunks(entries: SessionStoreEntry[]): SessionStoreEntry[][] {
  const out: SessionStoreEntry[][] = [];
  let chunk: SessionStoreEntry[] = [];
  let size = 0;
  entries.forEach((entry, i) => {
    const n = new TextEncoder().encode(encodeJson(entry, `entries.${i}`)).length; // Unencodable before sending
    if (chunk.length && (size + n > BATCH_BYTES || chunk.length >= BATCH_ENTRIES)) {
      out.push(chunk);
      chunk = [];
      size = 0;
    }
    chunk.push(entry);
    size += n;
  });
  if (chunk.length) out.push(chunk);
  return out;
}

interface StreamState {
  entries: number;
  summary: SessionSummaryEntry | undefined;
}

export interface SessionStoreOptions extends ClientOptions {
  /** Keeps several applications (or tenants) apart on one server. */
  namespacePrefix?: string;
  /** Given to each new conversation (erasure finds a person's sessions by it). */
  subject?: string;
  /** Seconds `delete` keeps retrying while maintenance runs. Default 120. */
  maintenanceWait?: number;
  /** Seconds a batch keeps retrying while other writers beat it. Default 30. */
  conflictDeadline?: number;
}

export class MemoryuiSessionStore implements SessionStore {
  readonly client: Memoryui;
  readonly namespacePrefix: string;
  readonly subject: string;
  readonly maintenanceWait: number;
  readonly conflictDeadline: number;
  // Per stream: the entry count stored and the summary last stored (what the next batch continues).
  private readonly streams = new Map<string, StreamState>();
  private readonly locks = new Locks();

  constructor(url?: string, options: SessionStoreOptions = {}) {
    this.client = new Memoryui(url, options);
    this.namespacePrefix = options.namespacePrefix ?? "";
    this.subject = options.subject ?? "";
    this.maintenanceWait = options.maintenanceWait ?? 120;
    this.conflictDeadline = options.conflictDeadline ?? CONFLICT_DEADLINE;
  }

  private namespace(projectKey: string): Promise<string> {
    return namespaceFor(projectKey, this.namespacePrefix);
  }

  /** Store a batch in call order; a retried batch is stored once. */
  async append(key: SessionKey, entries: SessionStoreEntry[]): Promise<void> {
    if (!entries.length) return;
    const stream: [string, string] = [await this.namespace(key.projectKey), externalId(key)];
    const batches = chunks(entries);
    await this.locks.run(JSON.stringify(stream), async () => {
      for (const batch of batches) await this.appendChunk(key, stream, batch);
    });
  }

  private async appendChunk(key: SessionKey, stream: [string, string], entries: SessionStoreEntry[]): Promise<void> {
    const [namespace, external_id] = stream;
    const name = JSON.stringify(stream);
    const main = key.subpath === undefined;
    const backoff = new ConflictBackoff(this.conflictDeadline);
    for (;;) {
      let state = this.streams.get(name);
      if (state === undefined) {
        state = await this.readState(namespace, external_id);
        this.streams.set(name, state);
      }
      const body: Record<string, unknown> = { format: FORMAT, namespace, external_id, entries,
        expected_entries: state.entries };
      if (this.subject) body.subject = this.subject;
      const folded = main ? foldSessionSummary(state.summary, key, entries) : undefined;
      if (folded) body.summary = folded.data;
      const digest = await sha256Hex(canonicalJson([namespace, external_id, state.entries, entries]));
      let answer: ImportAnswer;
      try {
        answer = await this.client.run<ImportAnswer>({ method: "POST", path: "/imports", body,
          idempotencyKey: `claude-sdk-${digest}` });
      } catch (error) {
        const wait = lostToAnotherWriter(error) ? backoff.wait() : null;
        if (wait === null) throw error;
        // Another writer stored a batch of this session meanwhile: fold again from what it left.
        this.streams.delete(name);
        await sleepSeconds(wait);
        continue;
      }
      const after = answer.stream ?? { entries: state.entries };
      let summary: SessionSummaryEntry | undefined;
      if (folded && after.summary_saved) summary = { ...folded, mtime: Number(after.updated_ms) };
      else if (folded && answer.unchanged) summary = state.summary; // every entry was stored already
      this.streams.set(name, { entries: after.entries ?? state.entries, summary });
      return;
    }
  }

  private async sources(projectKey: string, query: Record<string, string>): Promise<Source[]> {
    const answer = await this.client.run<{ items: Source[] }>({ method: "GET", path: "/imports/sources",
      query: { namespace: await this.namespace(projectKey), format: FORMAT, ...query } });
    return answer.items;
  }

  private async readState(namespace: string, external_id: string): Promise<StreamState> {
    const answer = await this.client.run<{ items: Source[] }>({ method: "GET", path: "/imports/sources",
      query: { namespace, format: FORMAT, key: external_id } });
    const item = answer.items[0];
    if (!item) return { entries: 0, summary: undefined };
    return { entries: item.entries, summary: item.summary ? { sessionId: external_id, mtime: item.summary.mtime,
      data: item.summary.data } : undefined };
  }

  /** Every entry appended under the key, in order, deep-equal; null if never written. */
  async load(key: SessionKey): Promise<SessionStoreEntry[] | null> {
    const namespace = await this.namespace(key.projectKey);
    const external_id = externalId(key);
    const entries: SessionStoreEntry[] = [];
    let cursor: string | null | undefined;
    for (;;) {
      let page: { items: SessionStoreEntry[]; next: string | null };
      try {
        page = await this.client.run({ method: "GET", path: "/imports/entries",
          query: { namespace, external_id, format: FORMAT, ...(cursor ? { cursor } : {}) } });
      } catch (error) {
        if (error instanceof NotFound) return null;
        throw error;
      }
      entries.push(...page.items);
      if (page.next === null || page.next === undefined) return entries;
      cursor = page.next;
    }
  }

  /** The project's sessions (not their subagent transcripts), with epoch-ms mtimes. */
  async listSessions(projectKey: string): Promise<Array<{ sessionId: string; mtime: number }>> {
    return (await this.sources(projectKey, { sessions: "true" })).map((item) => ({ sessionId: item.key,
      mtime: item.updated_ms }));
  }

  /** The summaries stored with the project's sessions (one call). */
  async listSessionSummaries(projectKey: string): Promise<SessionSummaryEntry[]> {
    return (await this.sources(projectKey, { sessions: "true" })).flatMap((item) => item.summary
      ? [{ sessionId: item.key, mtime: item.summary.mtime, data: item.summary.data }] : []);
  }

  /** The subpaths written under a session (its subagent transcripts). */
  async listSubkeys(key: { projectKey: string; sessionId: string }): Promise<string[]> {
    const prefix = `${externalId({ sessionId: key.sessionId })}/`;
    return (await this.sources(key.projectKey, { prefix })).map((item) => item.key.slice(prefix.length));
  }

  /** Delete a session with its subagent transcripts (or one subagent transcript); nothing stored: nothing to do. */
  async delete(key: SessionKey): Promise<void> {
    await this.deleteWithReceipt(key);
  }

  /** As `delete`, answering the deletion receipt (null when nothing was stored). */
  async deleteWithReceipt(key: SessionKey): Promise<Record<string, unknown> | null> {
    const namespace = await this.namespace(key.projectKey);
    const external_id = externalId(key);
    const deadline = performance.now() / 1000 + this.maintenanceWait;
    let wait = 0.5;
    let receipt: Record<string, unknown> | null;
    for (;;) {
      try {
        receipt = await this.client.run({ method: "DELETE", path: "/imports/entries",
          query: { namespace, external_id, format: FORMAT } });
      } catch (error) {
        if (error instanceof NotFound) receipt = null;
        else if (error instanceof Conflict && error.code === "maintenance_running"
                 && performance.now() / 1000 + wait <= deadline) {
          const told = Number(error.response?.headers.get("Retry-After"));
          await sleepSeconds(Number.isFinite(told) && told > 0 ? Math.min(told, 30) : wait);
          wait = Math.min(wait * 2, 10);
          continue;
        } else throw error;
      }
      break;
    }
    for (const name of [...this.streams.keys()]) {
      const [ns, id] = JSON.parse(name) as [string, string];
      if (ns === namespace && (id === external_id || id.startsWith(`${external_id}/`))) this.streams.delete(name);
    }
    return receipt;
  }
}
