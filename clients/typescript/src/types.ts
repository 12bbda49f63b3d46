/**
 * The API's shapes, taken from its OpenAPI document (src/openapi.ts is generated from
 * /api/v1/openapi.json with `npm run schema`). A field renamed on the server changes
 * openapi.ts, and every use of the old name here and in client.ts then fails to compile.
 */

import type { components, operations } from "./openapi.js";

type Schemas = components["schemas"];

export type Conversation = Schemas["ConversationOut"];
export type ConversationSummary = Schemas["ConversationSummary"];
export type ConversationPage = Schemas["ConversationPage"];
export type Deleted = Schemas["DeletedOut"];
export type Appended = Schemas["AppendOut"];
export type BatchAppended = Schemas["BatchOut"];
export type MessageItem = Schemas["MessageItem"];
export type MessagePage = Schemas["MessagePage"];
export type ActiveView = Schemas["ActiveOut"];
export type Checkpoint = Schemas["CheckpointOut"];
export type Fact = Schemas["FactOut"];
export type Recalled = Schemas["RecalledOut"];
export type TaskState = Schemas["StateOut"];
export type TaskStateWritten = Schemas["StateWriteOut"];
export type Recorded = Schemas["RecordedOut"];
export type ActionLookup = Schemas["ActionLookup"];
export type SearchPage = Schemas["SearchPage"];
export type SearchHit = Schemas["SearchHit"];
export type Snapshot = Schemas["SnapshotOut"];
export type ErrorBody = Schemas["ErrorOut"];

export type UserMessage = Schemas["UserMessage"];
export type AssistantMessage = Schemas["AssistantMessage"];
export type ToolMessage = Schemas["ToolMessage"];
export type SystemMessage = Schemas["SystemMessage"];
export type JournalMessage = Schemas["NoteMessage"] | Schemas["ThoughtMessage"] | Schemas["HeardMessage"]
  | Schemas["SaidMessage"] | Schemas["DidMessage"] | Schemas["WokeMessage"];
export type ToolCall = Schemas["ToolCall"];
export type ContentBlock = Schemas["TextBlock"] | Schemas["OtherBlock"];
/** One message, as written and as read back: a tagged union on `kind`. */
export type Message = MessageItem["message"];
export type MessageKind = Message["kind"];

/** The JSON body of an operation's request, by its operationId. */
export type RequestBody<Op extends keyof operations> =
  operations[Op] extends { requestBody: { content: { "application/json": infer B } } } ? B
    : operations[Op] extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;
/** The query parameters of an operation, by its operationId. */
export type QueryOf<Op extends keyof operations> = NonNullable<operations[Op]["parameters"]["query"]>;

export type CreateConversation = RequestBody<"create_conversation">;
export type ProposeFact = RequestBody<"conversations_facts_api_propose">;
export type RecordAction = RequestBody<"record_action">;
export type SearchQuery = QueryOf<"search_messages">;

// The session doors (/imports/…) answer plain JSON objects in the OpenAPI document; their
// shapes are written here, next to the server's conversations/imports/api.py.

/** A session key's stream as the server keeps it. */
export interface Stream {
  entries: number;
  updated_ms?: number;
  summary_saved?: boolean;
  conversation_id?: string | null;
  key?: string;
  generation?: number;
  [field: string]: unknown;
}

export interface Source {
  key: string;
  entries: number;
  updated_ms: number;
  summary: { data: Record<string, unknown>; mtime: number } | null;
}

export interface ImportAnswer {
  format: string;
  source?: string;
  namespace?: string;
  dry_run?: boolean;
  unchanged?: boolean;
  /** The main conversation the transcript became (null for a dry run). */
  conversation_id: string | null;
  created?: boolean;
  messages?: number;
  checkpoints?: number;
  problems?: Array<{ line?: number; message?: string; [field: string]: unknown }>;
  stream?: Stream;
  [field: string]: unknown;
}

export interface ImportTranscript {
  format?: string;
  /** A file's text (JSONL or JSON), or `document`, its JSON. */
  content?: string;
  document?: unknown;
  namespace?: string;
  subject?: string;
  dry_run?: boolean;
  pin_older_than_retention?: boolean;
}
