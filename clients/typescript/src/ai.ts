/**
 * The Vercel AI SDK's `ModelMessage[]` to and from memoryui rows, and a helper that keeps
 * each step of a `generateText` / `streamText` run (`@memoryui/client/ai`).
 *
 *     import { generateText } from "ai";
 *     import { StepPersister, toModelMessages } from "@memoryui/client/ai";
 *
 *     const memory = new StepPersister(mui, conversationId);
 *     const messages = [...toModelMessages(await mui.active(conversationId)), { role: "user", content: "…" }];
 *     await memory.saveInput(messages.slice(-1));
 *     await generateText({ model, messages, tools, stopWhen, onStepFinish: memory.onStepFinish });
 *
 * Mapping (the same rows as every other door, so the conversation reads the same on its page):
 *
 * | ModelMessage part | memoryui |
 * |---|---|
 * | system | `system` row |
 * | user text / image / file | `user` row: text blocks; an image as an `image` block whose source is its URL (by reference) or, for inline bytes, base64; a file as a `file_ref` block (URL or base64, media type, filename) |
 * | assistant text + tool-call parts | one `assistant` row with all its `tool_calls` ({id, name, arguments}) |
 * | assistant reasoning | a `thought` row before its reply |
 * | tool-result (text, json, error, denied, content) | one `tool` row per result (`is_error` for errors and denials); `meta.ai_output` keeps the output's type so it comes back as it went |
 *
 * Reading back (`toModelMessages`) follows the active view's rules of ./formats.ts: the
 * checkpoint's summary first as a system message, one reply one message, results right
 * after their calls (a call without a result gets an error result), a `thought` right
 * before a reply as its reasoning; other journal rows are left out.
 */

import type { ModelMessage } from "ai";

import type { Memoryui } from "./client.js";
import { BATCH_MAX, settle, spacedJson } from "./formats.js";
import { canonicalJson, sha256Hex } from "./sessions.js";
import type { ActiveView, Message } from "./types.js";

type Row = Record<string, any>;
type Part = Record<string, any>;

const b64 = (bytes: Uint8Array): string => {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
};

/** Where a part's bytes are: {url} for a reference (URL or a URL string), else {data} as base64. */
function sourceOf(value: unknown, mediaType?: string): { url: string } | { data: string; media_type: string } {
  if (value instanceof URL) return { url: value.href };
  if (typeof value === "string") {
    const found = /^data:([^;,]+);base64,(.*)$/s.exec(value);
    if (found) return { data: found[2], media_type: found[1] };
    if (/^https?:\/\//.test(value)) return { url: value };
    return { data: value, media_type: mediaType ?? "application/octet-stream" };
  }
  if (value instanceof Uint8Array) return { data: b64(value), media_type: mediaType ?? "application/octet-stream" };
  if (value instanceof ArrayBuffer) return { data: b64(new Uint8Array(value)), media_type: mediaType ?? "application/octet-stream" };
  throw new TypeError("an image or file part needs a URL, a base64 string or bytes");
}

function imageBlock(part: Part): Part {
  const source = sourceOf(part.image, part.mediaType);
  return "url" in source ? { type: "image", source: { type: "url", url: source.url } }
    : { type: "image", source: { type: "base64", media_type: part.mediaType ?? source.media_type, data: source.data } };
}

function fileBlock(part: Part): Part {
  const source = sourceOf(part.data, part.mediaType);
  return { type: "file_ref", media_type: part.mediaType, ...("url" in source ? { url: source.url } : { data: source.data }),
    ...(part.filename ? { filename: part.filename } : {}) };
}

const text = (value: string): string => (value.trim() ? value : "(empty)");

function userContent(content: ModelMessage["content"]): Row["content"] {
  if (typeof content === "string") return text(content);
  const blocks = (content as Part[]).flatMap((part) => {
    if (part.type === "text") return part.text.trim() ? [{ type: "text", text: part.text }] : [];
    if (part.type === "image") return [imageBlock(part)];
    if (part.type === "file") return [fileBlock(part)];
    return [];
  });
  return blocks.length ? blocks : "(empty)";
}

function toolRow(part: Part): Row {
  const output = part.output ?? { type: "text", value: "" };
  const row: Row = { kind: "tool", tool_call_id: part.toolCallId, name: part.toolName };
  switch (output.type) {
    case "text":
    case "error-text":
      row.content = text(String(output.value));
      break;
    case "json":
    case "error-json":
      row.content = spacedJson(output.value);
      break;
    case "execution-denied":
      row.content = `(denied${output.reason ? `: ${output.reason}` : ""})`;
      break;
    case "content": {
      const blocks = (output.value as Part[]).flatMap((item): Part[] => {
        if (item.type === "text") return item.text.trim() ? [{ type: "text", text: item.text }] : [];
        if (item.type === "image-url") return [{ type: "image", source: { type: "url", url: item.url } }];
        if (item.type === "image-data" || item.type === "media" && String(item.mediaType).startsWith("image/")) {
          return [{ type: "image", source: { type: "base64", media_type: item.mediaType, data: item.data } }];
        }
        if (item.type === "file-url") return [{ type: "file_ref", url: item.url, media_type: item.mediaType }];
        if (item.type === "file-data" || item.type === "media") {
          return [{ type: "file_ref", data: item.data, media_type: item.mediaType, filename: item.filename }];
        }
        return [{ type: "ai_content", part: item }];
      });
      row.content = blocks.length ? blocks : "(empty)";
      break;
    }
    default:
      row.content = spacedJson(output);
  }
  if (["error-text", "error-json", "execution-denied"].includes(output.type)) row.is_error = true;
  if (output.type !== "text" && output.type !== "content") {
    row.meta = { ai_output: output.type === "execution-denied" ? { type: output.type, reason: output.reason }
      : { type: output.type } };
  }
  return row;
}

/** ModelMessages as memoryui rows, in order (see the module for the mapping). */
export function toMemoryuiMessages(messages: readonly ModelMessage[]): Message[] {
  const rows: Row[] = [];
  for (const message of messages) {
    if (message.role === "system") rows.push({ kind: "system", content: text(message.content) });
    else if (message.role === "user") rows.push({ kind: "user", content: userContent(message.content) });
    else if (message.role === "assistant") {
      if (typeof message.content === "string") {
        if (message.content.trim()) rows.push({ kind: "assistant", content: message.content });
        continue;
      }
      const parts = message.content as Part[];
      for (const part of parts) {
        if (part.type === "reasoning" && part.text.trim()) rows.push({ kind: "thought", text: part.text });
      }
      const blocks = parts.flatMap((part) => part.type === "text" && part.text.trim() ? [{ type: "text", text: part.text }]
        : part.type === "file" ? [fileBlock(part)] : []);
      const calls = parts.filter((part) => part.type === "tool-call").map((part) => ({ id: part.toolCallId,
        name: part.toolName, arguments: part.input !== null && typeof part.input === "object" && !Array.isArray(part.input)
          ? part.input : { input: part.input ?? null } }));
      if (blocks.length || calls.length) {
        const row: Row = { kind: "assistant" };
        if (blocks.length) row.content = blocks.length === 1 && blocks[0].type === "text" ? blocks[0].text : blocks;
        if (calls.length) row.tool_calls = calls;
        rows.push(row);
      }
      // Results of provider-executed tools come in the assistant message; they are rows of their own.
      rows.push(...parts.filter((part) => part.type === "tool-result").map(toolRow));
    } else if (message.role === "tool") {
      rows.push(...(message.content as Part[]).filter((part) => part.type === "tool-result").map(toolRow));
    }
  }
  return rows as Message[];
}

function partOf(block: Part): Part | null {
  if (block.type === "text") return { type: "text", text: block.text };
  if (block.type === "image") {
    const source = block.source ?? {};
    if (source.type === "url") return { type: "image", image: new URL(source.url) };
    if (source.type === "base64") return { type: "image", image: source.data, mediaType: source.media_type };
  }
  if (block.type === "image_url" && typeof block.image_url?.url === "string") {
    return { type: "image", image: new URL(block.image_url.url) };
  }
  if (block.type === "file_ref") {
    return { type: "file", data: block.url ? new URL(block.url) : block.data, mediaType: block.media_type
      ?? "application/octet-stream", ...(block.filename ? { filename: block.filename } : {}) };
  }
  return { type: "text", text: `[${block.type} block]` };
}

function contentOf(content: unknown): string | Part[] {
  if (typeof content === "string") return content;
  return ((content as Part[]) ?? []).map(partOf).filter((p): p is Part => p !== null);
}

function textOnly(content: unknown): string {
  const parts = contentOf(content);
  return typeof parts === "string" ? parts : parts.map((p) => p.type === "text" ? p.text : `[${p.type}]`).join("\n\n");
}

function outputOf(row: Row, nameOf: Map<string, string>): Part {
  const kept = row.meta?.ai_output;
  let output: Part;
  if (kept?.type === "json" || kept?.type === "error-json") {
    try {
      output = { type: kept.type, value: JSON.parse(row.content) };
    } catch {
      output = { type: kept.type === "json" ? "text" : "error-text", value: textOnly(row.content) };
    }
  } else if (kept?.type === "execution-denied") {
    output = { type: "execution-denied", ...(kept.reason ? { reason: kept.reason } : {}) };
  } else if (typeof row.content !== "string") {
    const value = (row.content as Part[]).map((block) => {
      if (block.type === "text") return { type: "text", text: block.text };
      if (block.type === "image" && block.source?.type === "url") return { type: "image-url", url: block.source.url };
      if (block.type === "image" && block.source?.type === "base64") {
        return { type: "image-data", data: block.source.data, mediaType: block.source.media_type };
      }
      if (block.type === "file_ref" && block.url) return { type: "file-url", url: block.url, mediaType: block.media_type };
      if (block.type === "file_ref") {
        return { type: "file-data", data: block.data, mediaType: block.media_type, filename: block.filename };
      }
      if (block.type === "ai_content") return block.part;
      return { type: "text", text: `[${block.type} block]` };
    });
    output = row.is_error ? { type: "error-text", value: textOnly(row.content) } : { type: "content", value };
  } else {
    output = { type: row.is_error ? "error-text" : "text", value: row.content };
  }
  return { type: "tool-result", toolCallId: row.tool_call_id, toolName: row.name || nameOf.get(row.tool_call_id)
    || "unknown", output };
}

/**
 * The active view (or its items) as ModelMessages to send again (see the module).
 * `view` is what `Memoryui.active()` answers.
 */
export function toModelMessages(view: Pick<ActiveView, "items"> & { handoff?: ActiveView["handoff"] }):
  ModelMessage[] {
  const rows = view.items.map((item) => item.message as Row);
  // A thought right before a reply is that reply's reasoning: carried in its content.
  const merged: Row[] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    if (row.kind === "thought" && rows[i + 1]?.kind === "assistant") {
      const reasoning: Part[] = [];
      while (rows[i]?.kind === "thought") reasoning.push({ type: "reasoning", text: rows[i++].text });
      const reply = rows[i];
      const content = typeof reply.content === "string" ? [{ type: "text", text: reply.content }] : reply.content ?? [];
      merged.push({ ...reply, content: [...reasoning, ...content] });
    } else merged.push(row);
  }
  const out: ModelMessage[] = [];
  if (view.handoff) out.push({ role: "system", content: textOnly(view.handoff.content) });
  const nameOf = new Map<string, string>();
  for (const [turn, m] of settle(merged)) {
    if (turn === "system") out.push({ role: "system", content: textOnly(m.content) });
    else if (turn === "user") out.push({ role: "user", content: contentOf(m.content) } as ModelMessage);
    else if (turn === "assistant") {
      const parts: Part[] = m.content.map((block) => block.type === "reasoning"
        ? { type: "reasoning", text: block.text } : partOf(block) as Part);
      for (const call of m.tool_calls) {
        nameOf.set(call.id, call.name);
        const input = typeof call.arguments === "string" ? safeParse(call.arguments) : call.arguments;
        parts.push({ type: "tool-call", toolCallId: call.id, toolName: call.name, input });
      }
      if (parts.length) out.push({ role: "assistant", content: parts } as ModelMessage);
    } else if (turn === "results") {
      out.push({ role: "tool", content: m.map((row) => outputOf(row, nameOf)) } as ModelMessage);
    } else if (turn === "orphan") {
      out.push({ role: "user", content: `[tool result ${m.name || m.tool_call_id}] ${textOnly(m.content)}` });
    }
  }
  return out;
}

function safeParse(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

/**
 * Keeps a run's messages in a conversation as they are produced: pass `onStepFinish`
 * (each step's new messages, in one batch per step) and/or `onFinish` (whatever no step
 * kept). The SDK awaits both, so a step is stored before the next model call, and a write
 * that fails fails the run instead of being lost. Each batch carries an idempotency key
 * derived from the conversation, the run, where the run stands and the rows: retried, it is
 * kept once. One persister serves a conversation's runs one after another: a run starts
 * with `saveInput`, with a step numbered 0, or with an `onFinish` that no step of its run
 * came before, and each run is kept whole even when it says what an earlier one said.
 */
export class StepPersister {
  private kept = 0;
  private run: string;
  // Whether anything was written under `run` (a new run then needs a new id).
  private used = false;
  // Whether a step of the current run was kept (an onFinish then ends that run).
  private stepped = false;

  constructor(readonly client: Memoryui, readonly conversationId: string, options: { runId?: string } = {}) {
    this.run = options.runId ?? globalThis.crypto.randomUUID();
  }

  /** Keep the messages the run starts from (the user's turn), before the run. */
  async saveInput(messages: readonly ModelMessage[]): Promise<void> {
    this.newRun();
    await this.write("input", toMemoryuiMessages(messages));
  }

  /** For `onStepFinish`: the step's messages that are not kept yet. */
  readonly onStepFinish = async (step: { stepNumber?: number; response: { messages: readonly ModelMessage[] } },
  ): Promise<void> => {
    // The first step of a run, or messages fewer than those kept: another run of the same persister.
    if (step.stepNumber === 0 || step.response.messages.length < this.kept) this.newRun();
    this.stepped = true;
    await this.keep(step.response.messages);
  };

  /** For `onFinish`: whatever no step kept (all the run's messages, when used alone). */
  readonly onFinish = async (event: { response: { messages: readonly ModelMessage[] } }): Promise<void> => {
    if (!this.stepped) this.newRun();
    await this.keep(event.response.messages);
    this.stepped = false;
    this.kept = 0; // the run is over: the next step or onFinish is another run's
  };

  private newRun(): void {
    if (this.used) this.run = globalThis.crypto.randomUUID();
    this.used = false;
    this.kept = 0;
  }

  private async keep(all: readonly ModelMessage[]): Promise<void> {
    const fresh = all.slice(this.kept);
    if (!fresh.length) return;
    await this.write(`step-${this.kept}`, toMemoryuiMessages(fresh));
    this.kept = all.length;
  }

  private async write(where: string, rows: Message[]): Promise<void> {
    if (!rows.length) return;
    this.used = true;
    const digest = await sha256Hex(canonicalJson([this.conversationId, this.run, where, rows]));
    for (let start = 0; start < rows.length; start += BATCH_MAX) {
      await this.client.appendBatch(this.conversationId, rows.slice(start, start + BATCH_MAX),
        { idempotencyKey: `ai-sdk-${digest.slice(0, 40)}-${start}` });
    }
  }
}
