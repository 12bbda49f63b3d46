/**
 * `Memoryui`: the JSON API of memoryui over `fetch`, with the Python client's methods.
 *
 *     import { Memoryui } from "@memoryui/client";
 *     const mui = new Memoryui("http://127.0.0.1:8000", { apiKey: "mui_…" });
 *     const { conversation } = await mui.getOrCreate({ namespace: "my-agent", externalId: sessionId });
 *     await mui.append(conversation.id, { kind: "user", content: "Where is my refund?" });
 *     const view = await mui.active(conversation.id);
 *
 * A key of one project acts in its project: nothing to pass. An operator's all-projects key
 * acts in every project unless `project` (or MEMORYUI_PROJECT) names one, by its slug:
 *
 *     new Memoryui(url, { apiKey: opsKey, project: "support" });  // the X-Memoryui-Project header
 *
 * Answers are the API's JSON (snake_case, as the server writes it). Errors are the typed
 * errors of ./errors.ts. Every write carries an Idempotency-Key (pass your own, derived
 * from business values, to make a restarted process's retry safe too); its retries reuse it.
 */

import {
  type Call, type Query, type RawBody, Retries, type RetryOptions, send, sleep, type Transport, write,
} from "./core.js";
import type {
  ActionLookup, ActiveView, Appended, BatchAppended, Checkpoint, Conversation, ConversationPage,
  ConversationSummary, CreateConversation, Deleted, Fact, ImportAnswer, ImportTranscript, Message, MessageItem,
  MessagePage, ProposeFact, QueryOf, RequestBody, Recalled, RecordAction, Recorded, SearchPage, SearchQuery, Snapshot,
  TaskState,
  TaskStateWritten,
} from "./types.js";

type RequestBody_append_messages = RequestBody<"append_messages">;
type RequestBody_create_checkpoint = RequestBody<"create_checkpoint">;
type RequestBody_fork = RequestBody<"fork_conversation">;
type RequestBody_set_state = RequestBody<"set_task_state">;

export const USER_AGENT = "memoryui-client-ts/0.1";
/**
 * The project a request acts in, by its slug: needed only with an all-projects key (a key of
 * one project acts in its own; naming another answers 404). The server's answer to a request
 * that acted in every project carries it too, as "*".
 */
export const PROJECT_HEADER = "X-Memoryui-Project";

export interface ClientOptions {
  /** The API key (`mui_…`); defaults to MEMORYUI_API_KEY where `process.env` exists. */
  apiKey?: string;
  /**
   * The project (its slug) an all-projects key acts in; defaults to MEMORYUI_PROJECT where
   * `process.env` exists. A key of one project acts in its own and needs none.
   */
  project?: string;
  retries?: Retries | RetryOptions;
  /** Milliseconds each try may take. Default 30,000. */
  timeout?: number;
  /** A fetch to use instead of the global one (tests, proxies). */
  fetch?: typeof globalThis.fetch;
  /** How retries wait (tests pass one that records instead). */
  sleep?: (seconds: number) => Promise<void>;
}

export interface WriteOptions {
  idempotencyKey?: string;
}

/** The options of an import sent as the file itself: they go in the query string. */
export interface ImportFileOptions extends WriteOptions {
  /** A format name, or "auto" (the default), which finds out from the content. */
  format?: string;
  namespace?: string;
  subject?: string;
  /** Read and answer, write nothing. */
  dryRun?: boolean;
  /** Keep a file that makes no message (otherwise it creates nothing). */
  allowEmpty?: boolean;
  pinOlderThanRetention?: boolean;
  /** Default application/octet-stream: the server knows a zip or a database by its first bytes. */
  contentType?: string;
}

export interface AppendOptions extends WriteOptions {
  /** Write only if this is the next position (else PositionConflict, nothing written). */
  expectedPosition?: number;
}

function env(name: string): string | undefined {
  const process = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return process?.env?.[name];
}

/** The server: `url`, else MEMORYUI_URL; never a guessed default, which would send an agent's
 * memory to whatever answers there. */
function serverUrl(url: string | undefined): string {
  const found = url?.trim() || env("MEMORYUI_URL")?.trim();
  if (!found) {
    throw new TypeError('no memoryui server given: pass its URL (new Memoryui("http://127.0.0.1:8000")) '
      + "or set MEMORYUI_URL");
  }
  return found;
}

function baseUrl(url: string): string {
  const trimmed = url.replace(/\/+$/, "");
  return trimmed.endsWith("/api/v1") ? trimmed : `${trimmed}/api/v1`;
}

const id = (conversationId: string): string => encodeURIComponent(String(conversationId));

function clean<T extends Record<string, unknown>>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined && v !== null)) as Partial<T>;
}

/** One active view from its pages: checkpoint and handoff of the first, every item in order. */
export function mergeActivePages(first: ActiveView, more: ActiveView[]): ActiveView {
  return {
    ...first,
    items: [...first.items, ...more.flatMap((page) => page.items)],
    skipped: [...(first.skipped ?? []), ...more.flatMap((page) => page.skipped ?? [])],
    next: null,
    next_url: null,
  };
}

export class Memoryui {
  readonly transport: Transport;
  /** The project the client names (null: its key's own, or every project for an all-projects key). */
  readonly project: string | null;

  constructor(url?: string, options: ClientOptions = {}) {
    const apiKey = options.apiKey ?? env("MEMORYUI_API_KEY");
    this.project = (options.project ?? env("MEMORYUI_PROJECT") ?? "").trim() || null;
    const headers: Record<string, string> = { Accept: "application/json" };
    // Browsers refuse to set User-Agent; elsewhere it names the client in the server's logs.
    if (!("document" in globalThis)) headers["User-Agent"] = USER_AGENT;
    if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
    if (this.project) headers[PROJECT_HEADER] = this.project;
    const retries = options.retries instanceof Retries ? options.retries : new Retries(options.retries);
    this.transport = {
      baseUrl: baseUrl(serverUrl(url)), headers, retries,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis), timeout: options.timeout ?? 30_000,
      sleep: options.sleep ?? sleep,
    };
  }

  /** Send a Call (see core.ts) with the retry policy; the successful response. */
  request(call: Call): Promise<Response> {
    return send(this.transport, call);
  }

  /** Send a Call and read its JSON answer. */
  async run<T>(call: Call): Promise<T> {
    return (await this.request(call)).json() as Promise<T>;
  }

  // conversations

  /** A new conversation (with `externalId`: the existing one if the namespace has it). */
  create(options: { title?: string; subject?: string; meta?: Record<string, unknown>; namespace?: string;
                    externalId?: string } & WriteOptions = {}): Promise<Conversation> {
    const body: CreateConversation = clean({ title: options.title, subject: options.subject, meta: options.meta,
      namespace: options.namespace, external_id: options.externalId });
    return this.run(write("POST", "/conversations", body, options.idempotencyKey));
  }

  /** The conversation with this external id, created when there is none; `created` says which. */
  async getOrCreate(options: { externalId: string; namespace?: string; title?: string; subject?: string;
                               meta?: Record<string, unknown> } & WriteOptions):
    Promise<{ conversation: Conversation; created: boolean }> {
    const body: CreateConversation = clean({ title: options.title, subject: options.subject, meta: options.meta,
      namespace: options.namespace ?? "", external_id: options.externalId });
    const response = await this.request(write("POST", "/conversations", body, options.idempotencyKey));
    return { conversation: await response.json() as Conversation, created: response.status === 201 };
  }

  /** The conversation with this external id, or null. */
  async find(options: { externalId: string; namespace?: string }): Promise<ConversationSummary | null> {
    const query: QueryOf<"list_conversations"> = { namespace: options.namespace ?? "",
      external_id: options.externalId };
    const page = await this.run<ConversationPage>({ method: "GET", path: "/conversations", query: query as Query });
    return page.items[0] ?? null;
  }

  /**
   * The conversations a framework knows by its own id, where it stands now first: `framework`
   * "langgraph" (a thread id; `checkpointNs` "" for the root graph, omitted for all), "claude" or
   * "openai-agents" (a session id), "otel" (a gen_ai.conversation.id or a trace id), "pydantic-ai"
   * (a history id), "langchain" (a session id).
   */
  async lookup(options: { framework: string; id: string; checkpointNs?: string }): Promise<ConversationSummary[]> {
    const query: Query = { framework: options.framework, id: options.id };
    if (options.checkpointNs !== undefined) query.checkpoint_ns = options.checkpointNs;
    const page = await this.run<ConversationPage>({ method: "GET", path: "/lookup", query });
    return page.items;
  }

  get(conversationId: string): Promise<Conversation> {
    return this.run({ method: "GET", path: `/conversations/${id(conversationId)}` });
  }

  /** Delete a conversation (needs the `admin` scope). */
  delete(conversationId: string): Promise<Deleted> {
    return this.run({ method: "DELETE", path: `/conversations/${id(conversationId)}` });
  }

  /** Every conversation (newest activity first), following the cursors page by page. */
  async *list(options: { subject?: string; namespace?: string; order?: string; pageSize?: number } = {}):
    AsyncGenerator<ConversationSummary> {
    let cursor: string | null | undefined;
    do {
      const query: QueryOf<"list_conversations"> = clean({ cursor, limit: options.pageSize,
        subject: options.subject, namespace: options.namespace, order: options.order as never });
      const page = await this.run<ConversationPage>({ method: "GET", path: "/conversations", query: query as Query });
      yield* page.items;
      cursor = page.next;
    } while (cursor);
  }

  // messages

  /** Append one message; {position, kind}. */
  append(conversationId: string, message: Message, options: AppendOptions = {}): Promise<Appended> {
    return this.run(write("POST", `/conversations/${id(conversationId)}/messages`, message, options.idempotencyKey,
      clean({ expected_position: options.expectedPosition })));
  }

  /** Append 1..1,000 messages in one transaction; {first_position, last_position, count}. */
  appendBatch(conversationId: string, messages: Message[], options: AppendOptions = {}): Promise<BatchAppended> {
    const body: RequestBody_append_messages = { messages };
    return this.run(write("POST", `/conversations/${id(conversationId)}/messages/batch`, body,
      options.idempotencyKey, clean({ expected_position: options.expectedPosition })));
  }

  /** The full record from position `after`+1 on: items {position, kind, message, created_at}. */
  async *messages(conversationId: string, options: { after?: number; pageSize?: number } = {}):
    AsyncGenerator<MessageItem> {
    // The first page starts after `after`; each later one at the previous page's `next` cursor.
    let cursor: string | null | undefined;
    do {
      const query: QueryOf<"list_messages"> = clean(cursor ? { cursor, limit: options.pageSize }
        : { after: options.after ?? -1, limit: options.pageSize });
      const page: MessagePage = await this.run({ method: "GET", path: `/conversations/${id(conversationId)}/messages`,
        query: query as Query });
      yield* page.items;
      cursor = page.next;
    } while (cursor);
  }

  /** The active view (what to send the model): {checkpoint, handoff, items, next_position, …}, all pages. */
  async active(conversationId: string): Promise<ActiveView> {
    const path = `/conversations/${id(conversationId)}/active`;
    const first = await this.run<ActiveView>({ method: "GET", path });
    const more: ActiveView[] = [];
    for (let page = first; page.next !== null;) {
      const query: QueryOf<"get_active_view"> = { cursor: page.next };
      page = await this.run<ActiveView>({ method: "GET", path, query: query as Query });
      more.push(page);
    }
    return mergeActivePages(first, more);
  }

  /** Fold positions 0..position into `summary` (the active view then starts with it). */
  checkpoint(conversationId: string, options: { position: number; summary: string } & WriteOptions):
    Promise<Checkpoint> {
    const body: RequestBody_create_checkpoint = { position: options.position, summary: options.summary };
    return this.run(write("POST", `/conversations/${id(conversationId)}/checkpoints`, body, options.idempotencyKey));
  }

  /** A new conversation holding copies of positions 0..position. */
  fork(conversationId: string, options: { position: number; title?: string; externalId?: string } & WriteOptions):
    Promise<Conversation> {
    const body: RequestBody_fork = clean({ position: options.position, title: options.title,
      external_id: options.externalId }) as RequestBody_fork;
    return this.run(write("POST", `/conversations/${id(conversationId)}/forks`, body, options.idempotencyKey));
  }

  /** The conversation as a download (json, jsonl or markdown): the Response, its body not yet read. */
  export(conversationId: string, options: { format?: "json" | "jsonl" | "markdown" } = {}): Promise<Response> {
    return this.request({ method: "GET", path: `/conversations/${id(conversationId)}/export`,
      query: { format: options.format ?? "jsonl" } });
  }

  /** One page of a full-text search over messages (`q`: words, "a phrase", prefix*, a OR b, -excluded). */
  search(query: SearchQuery): Promise<SearchPage> {
    return this.run({ method: "GET", path: "/search", query: query as Query });
  }

  /** Import a whole transcript (Claude Code, Codex, OpenAI, Anthropic, journal; `format` "auto" finds out). */
  importTranscript(transcript: ImportTranscript, options: WriteOptions = {}): Promise<ImportAnswer> {
    return this.run(write("POST", "/imports", transcript, options.idempotencyKey));
  }

  /**
   * Import a file as it is, sent as the body of POST /imports with its options in the query
   * string: a transcript of any format, a zip of a folder, an OpenCode SQLite database. In
   * Node, `await openAsBlob(path)` (node:fs) sends it from disk without reading it whole.
   * The same file again creates nothing; a session that grew appends what is new.
   */
  importFile(data: RawBody, options: ImportFileOptions = {}): Promise<ImportAnswer> {
    const query = clean({ format: options.format, namespace: options.namespace, subject: options.subject,
      dry_run: options.dryRun, allow_empty: options.allowEmpty,
      pin_older_than_retention: options.pinOlderThanRetention });
    return this.run({ ...write("POST", "/imports", undefined, options.idempotencyKey, query),
      raw: { data, contentType: options.contentType ?? "application/octet-stream" } });
  }

  // facts

  /** Propose a long-term fact (a person reviews it before it is ever recalled). */
  proposeFact(fact: ProposeFact, options: WriteOptions = {}): Promise<Fact> {
    return this.run(write("POST", "/facts", fact, options.idempotencyKey));
  }

  /** The best approved facts about a subject: [{fact, score, parts}]. */
  async recall(options: { subject: string; query?: string; limit?: number }): Promise<Recalled[]> {
    const query: QueryOf<"conversations_facts_api_recall"> = { subject: options.subject, query: options.query ?? "",
      limit: options.limit ?? 10 };
    return (await this.run<{ items: Recalled[] }>({ method: "GET", path: "/facts/recall",
      query: query as Query })).items;
  }

  // task state and the actions ledger (written by code after a tool returns, never by the model)

  /** The task state: {version, state, position, updated_at, updated_by, …}. */
  state(conversationId: string): Promise<TaskState> {
    return this.run({ method: "GET", path: `/conversations/${id(conversationId)}/state` });
  }

  /** Replace the task state if it is still at `expectedVersion` (else Conflict `version_conflict`).
   * Safe to retry without a key: sending the state it already has changes nothing. */
  setState(conversationId: string, state: Record<string, unknown>, options: { expectedVersion: number }):
    Promise<TaskStateWritten> {
    const body: RequestBody_set_state = { state, expected_version: options.expectedVersion };
    return this.run({ method: "PUT", path: `/conversations/${id(conversationId)}/state`, body });
  }

  /** Record a side effect under its business `key`: {status: performed | failed | already_performed, action, attempt}. */
  recordAction(conversationId: string, action: { key: string; name: string; arguments?: unknown; result?: unknown;
                                                 status?: "performed" | "failed" } & WriteOptions): Promise<Recorded> {
    const body = { idempotency_key: action.key, name: action.name, arguments: action.arguments ?? null,
      result: action.result ?? null, status: action.status ?? "performed" } as RecordAction;
    return this.run(write("POST", `/conversations/${id(conversationId)}/actions`, body, action.idempotencyKey));
  }

  /** Record a workspace snapshot (a git commit kept under the store's own ref) on the turn at
   * `snapshot.position`; take it with git before the turn, as the Python client's workspace module does. */
  recordSnapshot(conversationId: string, snapshot: RequestBody<"record_snapshot">, options: WriteOptions = {}):
    Promise<Snapshot> {
    return this.run(write("POST", `/conversations/${id(conversationId)}/snapshots`, snapshot, options.idempotencyKey));
  }

  /** Has it been done? {performed, action, entries} for a business key. */
  findAction(key: string, options: { namespace?: string; conversationId?: string } = {}): Promise<ActionLookup> {
    const query: QueryOf<"find_action"> = clean({ idempotency_key: key, namespace: options.namespace,
      conversation_id: options.conversationId }) as QueryOf<"find_action">;
    return this.run({ method: "GET", path: "/actions", query: query as Query });
  }
}

