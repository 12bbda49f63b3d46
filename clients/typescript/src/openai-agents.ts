/**
 * An OpenAI Agents JS `Session` kept in memoryui (`@memoryui/client/openai-agents`).
 *
 *     import { Agent, run } from "@openai/agents";
 *     import { MemoryuiSession } from "@memoryui/client/openai-agents";
 *
 *     const session = new MemoryuiSession("user-42", { url: "http://127.0.0.1:8000", apiKey: "mui_…" });
 *     const result = await run(agent, "Where is my refund?", { session });
 *
 * The same endpoints and behaviour as the Python client's MemoryuiSession: each item is
 * stored verbatim as it is produced (`getItems` answers what was added, deep-equal),
 * beside the readable row it maps to on the server (messages by role, a function call →
 * a tool call, its result → a `tool` row, reasoning → `thought`, a `compaction` item → a
 * checkpoint). memoryui's log is append-only, so nothing is destroyed:
 *
 * - `getItems()` answers the active view: after a checkpoint its summary comes first;
 *   `limit` keeps the latest N;
 * - `addItems()` appends in one request, conditional on the entry count it continues
 *   from, under an idempotency key derived from the items: a retry stores them once; when
 *   another writer came first it reads again and retries for up to `conflictDeadline` s;
 * - `popItem()` takes the last item back (the conversation keeps its rows and a note);
 * - `clearSession()` goes on in a new, empty conversation, a child of the one it leaves.
 *
 * Conversations are in `namespace` ("openai-agents") with the session id as external id.
 * The key needs `read` and `write`.
 */

import type { AgentInputItem, Session } from "@openai/agents";

import { type ClientOptions, Memoryui } from "./client.js";
import { encodeJson } from "./core.js";
import { SESSION_ITEMS_MAX } from "./formats.js";
import { canonicalJson, CONFLICT_DEADLINE, ConflictBackoff, Locks, lostToAnotherWriter, sha256Hex, sleepSeconds }
  from "./sessions.js";
import type { Stream } from "./types.js";

export const FORMAT = "openai-responses";

export interface MemoryuiSessionOptions extends ClientOptions {
  url?: string;
  namespace?: string;
  /** Given to each new conversation (erasure finds a person's sessions by it). */
  subject?: string;
  conflictDeadline?: number;
}

export class MemoryuiSession implements Session {
  readonly client: Memoryui;
  readonly namespace: string;
  readonly subject: string;
  readonly conflictDeadline: number;
  private stream: Stream | null = null; // the head as last seen: {key, entries, conversation_id, …}
  private readonly lock = new Locks();

  constructor(readonly sessionId: string, options: MemoryuiSessionOptions = {}) {
    if (typeof sessionId !== "string" || !sessionId.trim() || sessionId.includes("#")) {
      throw new TypeError("sessionId must be a non-empty string without '#'");
    }
    this.client = new Memoryui(options.url, options);
    this.namespace = options.namespace ?? "openai-agents";
    this.subject = options.subject ?? "";
    this.conflictDeadline = options.conflictDeadline ?? CONFLICT_DEADLINE;
  }

  /** The conversation the session is in now (after the last call), if it has one. */
  get conversationId(): string | null {
    return (this.stream?.conversation_id as string | null | undefined) ?? null;
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  private async read(limit?: number): Promise<AgentInputItem[]> {
    const answer = await this.client.run<{ items: AgentInputItem[]; stream: Stream }>({ method: "GET",
      path: "/imports/sessions/items", query: { namespace: this.namespace, session_id: this.sessionId, limit } });
    this.stream = answer.stream;
    return answer.items;
  }

  private async held(): Promise<number> {
    if (this.stream === null) await this.read(0);
    return (this.stream as Stream).entries;
  }

  /** The active view as items, oldest first (the latest `limit` when given). */
  getItems(limit?: number): Promise<AgentInputItem[]> {
    return this.lock.run("session", () => this.read(limit));
  }

  /** Append items as they are produced; a retried call stores them once. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    if (!items.length) return;
    const plain = JSON.parse(encodeJson(items, "items")) as AgentInputItem[]; // Unencodable before sending
    await this.lock.run("session", async () => {
      for (let start = 0; start < plain.length; start += SESSION_ITEMS_MAX) {
        await this.append(plain.slice(start, start + SESSION_ITEMS_MAX));
      }
    });
  }

  private async append(items: AgentInputItem[]): Promise<void> {
    const backoff = new ConflictBackoff(this.conflictDeadline);
    for (;;) {
      const held = await this.held();
      const digest = await sha256Hex(canonicalJson([this.namespace, this.sessionId, this.stream?.key ?? null, held,
        items]));
      const body: Record<string, unknown> = { format: FORMAT, namespace: this.namespace, external_id: this.sessionId,
        entries: items, expected_entries: held };
      if (this.subject) body.subject = this.subject;
      try {
        const answer = await this.client.run<{ stream: Stream }>({ method: "POST", path: "/imports", body,
          idempotencyKey: `oai-agents-${digest}` });
        this.stream = answer.stream;
        return;
      } catch (error) {
        const wait = lostToAnotherWriter(error) ? backoff.wait() : null;
        if (wait === null) throw error;
        this.stream = null; // another writer, a pop or a clear came first: read where it stands
        await sleepSeconds(wait);
      }
    }
  }

  /** Take the last item back (left out of the items from then on; the conversation keeps its
   * rows, with a note saying so); the item, or undefined when the session is empty. */
  popItem(): Promise<AgentInputItem | undefined> {
    return this.lock.run("session", async () => {
      const backoff = new ConflictBackoff(this.conflictDeadline);
      for (;;) {
        const body = { namespace: this.namespace, session_id: this.sessionId, expected_entries: await this.held() };
        try {
          const answer = await this.client.run<{ item: AgentInputItem | null; stream: Stream }>({ method: "POST",
            path: "/imports/sessions/pop", body, idempotencyKey: await key("pop", body, this.stream) });
          this.stream = answer.stream;
          return answer.item ?? undefined;
        } catch (error) {
          const wait = error instanceof Error && (error as { code?: string }).code === "entries_conflict"
            ? backoff.wait() : null;
          if (wait === null) throw error;
          this.stream = null;
          await sleepSeconds(wait);
        }
      }
    });
  }

  /** Go on in a new, empty conversation (the old one stays as it was). */
  clearSession(): Promise<void> {
    return this.lock.run("session", async () => {
      const body = { namespace: this.namespace, session_id: this.sessionId };
      const answer = await this.client.run<{ stream: Stream }>({ method: "POST", path: "/imports/sessions/clear", body,
        idempotencyKey: await key("clear", { ...body, held: await this.held() }, this.stream) });
      this.stream = answer.stream;
    });
  }
}

async function key(op: string, body: Record<string, unknown>, stream: Stream | null): Promise<string> {
  return `oai-agents-${op}-${(await sha256Hex(canonicalJson([op, body, stream?.key ?? null]))).slice(0, 48)}`;
}
