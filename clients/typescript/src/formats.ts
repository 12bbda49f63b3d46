/**
 * The active view in the request shapes of model APIs, by the same rules as the Python
 * client's memoryui_client.formats (read its docstring for the whole table):
 *
 * - `toOpenAIMessages(view)` → the `messages` of OpenAI's Chat Completions API;
 * - `toAnthropicMessages(view)` → {system?, messages} for Anthropic's Messages API;
 * - `toGeminiContents(view)` → {systemInstruction?, contents} for Gemini's generateContent.
 *
 * The server's exports and the Python client follow the same rules (tests/test_render_rules.py
 * renders every conversation all three ways and compares). A view with nothing to send throws
 * `NothingToSend`; one with only a handoff or system text sends it, with a `(continued)` user
 * turn where Anthropic and Gemini need one. A `system` row's image (or other non-text block) is
 * named as `[image block]` text in all three, never dropped.
 *
 * The handoff (the checkpoint's summary) comes first; journal rows (note, thought, …) are
 * dropped unless `journal: "text"` keeps them as `[kind] text`. Every body is one the APIs
 * accept: one reply is one assistant message with all its calls (adjacent assistant rows
 * of one reply are joined), tool results follow their calls as one block (a journal entry
 * or stray result met inside is sent after it), a call without a result gets an `is_error`
 * result, a result without its call becomes `[tool result …]` user text; Anthropic turns
 * alternate starting with `user`, tool ids are made `[a-zA-Z0-9_-]` alike in call and
 * result, and the last assistant text loses its trailing white space.
 */

import type { ActiveView, Message } from "./types.js";

export type JournalMode = "drop" | "text";
type Row = Record<string, any>;
type Block = Record<string, any>;

/** The view holds nothing a model could be sent: no request body would be valid. */
export class NothingToSend extends Error {
  constructor() {
    super("the active view holds nothing a model could be sent (no message and no summary; journal rows are " +
      "left out unless asked for)");
    this.name = "NothingToSend";
  }
}

// BEGIN generated from conversations/message_schema.py by tools/client_rules.py, do not edit by hand
export const CHAT_KINDS: readonly string[] = ["user", "assistant", "tool", "system"];
export const JOURNAL_KINDS: readonly string[] = ["note", "thought", "heard", "said", "did", "woke"];
export const KINDS: readonly string[] = [...CHAT_KINDS, ...JOURNAL_KINDS];
/** The fields a message of each kind must carry, and those it may (an assistant message
 * needs `content` or `tool_calls`); any other field is refused. */
export const KIND_FIELDS: Readonly<Record<string, { required: readonly string[]; optional: readonly string[] }>> = {
  user: { required: ["content"], optional: ["meta"] },
  assistant: { required: [], optional: ["meta", "content", "tool_calls"] },
  tool: { required: ["tool_call_id", "content"], optional: ["meta", "name", "is_error"] },
  system: { required: ["content"], optional: ["meta"] },
  note: { required: ["text"], optional: ["meta"] },
  thought: { required: ["text"], optional: ["meta"] },
  heard: { required: ["text"], optional: ["meta"] },
  said: { required: ["text"], optional: ["meta"] },
  did: { required: ["text"], optional: ["meta"] },
  woke: { required: ["text"], optional: ["meta"] },
};
/** Messages in one append. */
export const BATCH_MAX = 1000;
/** Items in one batch of a session. */
export const SESSION_ITEMS_MAX = 1000;
/** Characters of a conversation's namespace. */
export const NAMESPACE_MAX = 200;
// END of the generated block
export const NO_RESULT = "(no result was recorded for this call)";
export const CONTINUED = "(continued)";

export type Settled =
  | ["system" | "user" | "journal" | "orphan", Row]
  | ["assistant", { content: Block[]; tool_calls: Row[] }]
  | ["results", Row[]];

function checkMode(journal: string): void {
  if (journal !== "drop" && journal !== "text") throw new TypeError("journal must be one of drop, text");
}

const messagesOf = (view: Pick<ActiveView, "items">): Row[] => (view.items ?? []).map((item) => item.message as Row);

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  return ((content as Block[] | null) ?? [])
    .filter((b) => b && typeof b === "object" && b.type === "text").map((b) => b.text ?? "").join("\n");
}

const journalText = (m: Row): string => `[${m.kind}] ${m.text}`;
const orphanText = (m: Row): string => `[tool result ${m.name || m.tool_call_id}] ${textOf(m.content)}`;

function blocks(content: unknown): Block[] {
  if (typeof content === "string") return content.trim() ? [{ type: "text", text: content }] : [];
  return ((content as Block[] | null) ?? []).filter((b) => b && typeof b === "object" && !Array.isArray(b))
    .map((b) => ({ ...b }));
}

/** The rows of a view as request turns, in the order the APIs accept (see the module). */
export function settle(messages: readonly Row[], options: { journal?: JournalMode } = {}): Settled[] {
  const journal = options.journal ?? "drop";
  const out: Settled[] = [];
  const held: Settled[] = [];
  let reply: { content: Block[]; tool_calls: Row[] } | null = null;
  let open: string[] = [];
  let results: Row[] | null = null;

  const close = (): void => {
    if (reply !== null && open.length) {
      results = [...(results ?? []), ...open.map((id) => ({ kind: "tool", tool_call_id: id, content: NO_RESULT,
        is_error: true }))];
    }
    if (results && results.length) out.push(["results", results]);
    out.push(...held);
    held.length = 0;
    reply = null;
    open = [];
    results = null;
  };

  for (const m of messages) {
    const kind = m?.kind;
    if (kind === "assistant") {
      const calls: Row[] = [...(m.tool_calls ?? [])];
      const current = reply as { content: Block[]; tool_calls: Row[] } | null;
      if (current !== null && results === null && (current.tool_calls.length || calls.length)) {
        current.content.push(...blocks(m.content)); // the same reply, split over rows
        current.tool_calls.push(...calls);
        open.push(...calls.map((c) => c.id));
        continue;
      }
      close();
      const next = { content: blocks(m.content), tool_calls: calls };
      out.push(["assistant", next]);
      reply = next; // a text reply may still be followed by its calls
      open = calls.map((c) => c.id);
    } else if (kind === "tool") {
      const at = open.indexOf(m.tool_call_id);
      if (at >= 0) {
        open.splice(at, 1);
        results = [...(results ?? []), m];
        if (!open.length) close();
      } else if (open.length) {
        held.push(["orphan", m]);
      } else {
        close();
        out.push(["orphan", m]);
      }
    } else if (JOURNAL_KINDS.includes(kind)) {
      if (journal !== "text") continue;
      if (open.length) held.push(["journal", m]);
      else {
        close();
        out.push(["journal", m]);
      }
    } else if (kind === "system" || kind === "user") {
      close();
      out.push([kind, m]);
    }
  }
  close();
  return out;
}

const placeholder = (b: Block): Block => ({ type: "text", text: `[${b.type} block]` });

/** An Anthropic image block as an OpenAI image_url part. */
function imageUrlOf(b: Block): Block | null {
  const source = b.source && typeof b.source === "object" ? b.source : {};
  if (source.type === "url" && typeof source.url === "string") return { type: "image_url", image_url: { url: source.url } };
  if (source.type === "base64" && typeof source.data === "string") {
    return { type: "image_url", image_url: { url: `data:${source.media_type || "image/png"};base64,${source.data}` } };
  }
  return null;
}

/** An OpenAI image_url part as an Anthropic image block. */
function imageOf(part: Block): Block | null {
  const image = part.image_url && typeof part.image_url === "object" ? part.image_url : {};
  if (typeof image.url !== "string") return null;
  const found = /^data:(image\/[a-z]+);base64,(.*)$/s.exec(image.url);
  if (found) return { type: "image", source: { type: "base64", media_type: found[1], data: found[2] } };
  return { type: "image", source: { type: "url", url: image.url } };
}

// ---- OpenAI --------------------------------------------------------------------------------

function openaiUserContent(content: unknown): string | Block[] {
  if (typeof content === "string") return content;
  return blocks(content).map((b) => ["text", "image_url", "input_audio", "file"].includes(b.type) ? b
    : (b.type === "image" ? imageUrlOf(b) : null) ?? placeholder(b));
}

/** Text-only content (system, assistant, tool): a string, other blocks named. */
const openaiText = (content: unknown): string =>
  blocks(content).map((b) => (b.type === "text" ? b : placeholder(b)).text).join("\n\n");

/** The text of each `system` row, its other blocks named as OpenAI's system message names them:
 * an image left out unsaid would be a prompt the model never saw. */
const systemRows = (settled: Settled[]): string[] =>
  settled.filter(([turn]) => turn === "system").map(([, m]) => openaiText((m as Row).content));

/** JSON text spaced as the Python client writes it (`{"a": 1, "b": [1, 2]}`), so both send the same bytes. */
export function spacedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(spacedJson).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${spacedJson(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value);
}

const argumentsText = (call: Row): string =>
  typeof call.arguments === "string" ? call.arguments : spacedJson(call.arguments ?? {});

/** The active view as Chat Completions `messages`. */
export function toOpenAIMessages(view: Pick<ActiveView, "items"> & { handoff?: ActiveView["handoff"] },
                                 options: { journal?: JournalMode } = {}): Row[] {
  const journal = options.journal ?? "drop";
  checkMode(journal);
  const out: Row[] = [];
  if (view.handoff) out.push({ role: "system", content: openaiText(view.handoff.content) });
  for (const [turn, m] of settle(messagesOf(view), { journal })) {
    if (turn === "system") out.push({ role: "system", content: openaiText(m.content) });
    else if (turn === "user") out.push({ role: "user", content: openaiUserContent(m.content) });
    else if (turn === "assistant") {
      const message: Row = { role: "assistant", content: openaiText(m.content) || null };
      if (m.tool_calls.length) {
        message.tool_calls = m.tool_calls.map((c) => ({ id: c.id, type: "function",
          function: { name: c.name, arguments: argumentsText(c) } }));
      }
      if (message.content !== null || m.tool_calls.length) out.push(message);
    } else if (turn === "results") {
      for (const r of m) {
        out.push({ role: "tool", tool_call_id: r.tool_call_id, content: openaiText(r.content) || "(empty result)" });
      }
    } else if (turn === "journal") out.push({ role: "system", content: journalText(m) });
    else if (turn === "orphan") out.push({ role: "user", content: orphanText(m) });
  }
  if (!out.length) throw new NothingToSend();
  return out;
}

// ---- Anthropic -----------------------------------------------------------------------------

const ANTHROPIC_BLOCKS = ["text", "image", "document", "search_result"];

const anthropicBlocks = (content: unknown): Block[] =>
  blocks(content).map((b) => ANTHROPIC_BLOCKS.includes(b.type) ? b
    : (b.type === "image_url" ? imageOf(b) : null) ?? placeholder(b));

/** Tool ids as Anthropic takes them (`^[a-zA-Z0-9_-]+$`), the same for a call and its result. */
function toolIds(): (original: string) => string {
  const map = new Map<string, string>();
  return (original) => {
    let safe = map.get(original);
    if (safe === undefined) {
      const base = original.replace(/[^a-zA-Z0-9_-]/g, "_") || "_";
      const taken = new Set(map.values());
      safe = base;
      for (let n = 2; taken.has(safe); n++) safe = `${base}_${n}`;
      map.set(original, safe);
    }
    return safe;
  };
}

/** JSON.parse that refuses what Python's strict parse refuses: NaN and numbers out of range stay text. */
function strictArguments(text: string): unknown {
  const value = JSON.parse(text, (_key, v) => {
    if (typeof v === "number" && !Number.isFinite(v)) throw new RangeError("out of range");
    return v;
  });
  return value;
}

/** A call's arguments as an object (JSON text parsed strictly; anything else wrapped). */
function toolInput(c: Row): unknown {
  let input: unknown = c.arguments;
  if (typeof input === "string") {
    try {
      input = strictArguments(input);
    } catch {
      input = { arguments: input };
    }
  }
  if (input === null || typeof input !== "object" || Array.isArray(input)) input = { arguments: input };
  return input;
}

/** Settled turns (see `settle`) as alternating Messages API turns, without `system`. */
export function anthropicTurns(settled: Settled[]): Row[] {
  const ids = toolIds();
  const turns: { role: "user" | "assistant"; content: Block[] }[] = [];
  const add = (role: "user" | "assistant", content: Block[]): void => {
    if (!content.length) return;
    const last = turns[turns.length - 1];
    if (last && last.role === role) last.content.push(...content);
    else turns.push({ role, content });
  };
  for (const [turn, m] of settled) {
    if (turn === "user") add("user", anthropicBlocks(m.content));
    else if (turn === "assistant") {
      const content = blocks(m.content).map((b) => (b.type === "text" ? b : placeholder(b)));
      for (const c of m.tool_calls) {
        content.push({ type: "tool_use", id: ids(c.id), name: c.name, input: toolInput(c) });
      }
      add("assistant", content);
    } else if (turn === "results") {
      add("user", m.map((r) => {
        const result: Block = { type: "tool_result", tool_use_id: ids(r.tool_call_id),
          content: typeof r.content === "string" ? r.content : anthropicBlocks(r.content) };
        if (r.is_error) result.is_error = true;
        return result;
      }));
    } else if (turn === "journal") add("user", [{ type: "text", text: journalText(m) }]);
    else if (turn === "orphan") add("user", [{ type: "text", text: orphanText(m) }]);
  }
  if (turns.length && turns[0].role === "assistant") turns.unshift({ role: "user", content: [{ type: "text",
    text: CONTINUED }] });
  const last = turns[turns.length - 1];
  if (last && last.role === "assistant") {
    const end = last.content[last.content.length - 1];
    if (end.type === "text") {
      const text = String(end.text).trimEnd();
      if (text) last.content[last.content.length - 1] = { ...end, text };
      else if (last.content.length > 1) last.content.pop();
    }
  }
  return turns;
}

/** The active view as {system?, messages} for the Messages API. */
export function toAnthropicMessages(view: Pick<ActiveView, "items"> & { handoff?: ActiveView["handoff"] },
                                    options: { journal?: JournalMode } = {}): { system?: string; messages: Row[] } {
  const journal = options.journal ?? "drop";
  checkMode(journal);
  const system = view.handoff ? [textOf(view.handoff.content)] : [];
  const settled = settle(messagesOf(view), { journal });
  system.push(...systemRows(settled));
  const kept = system.filter((s) => s.trim());
  let messages = anthropicTurns(settled.filter(([turn]) => turn !== "system"));
  if (!messages.length) {
    if (!kept.length) throw new NothingToSend();
    messages = [{ role: "user", content: [{ type: "text", text: CONTINUED }] }];
  }
  // The system prompt first, as the Python client writes it (the same keys in the same order).
  return kept.length ? { system: kept.join("\n\n"), messages } : { messages };
}

// ---- Gemini --------------------------------------------------------------------------------

function geminiPart(b: Block): Block {
  if (b.type === "text") return { text: b.text ?? "" };
  if (b.type === "image") {
    const source: Row = b.source && typeof b.source === "object" ? b.source : {};
    if (source.type === "base64" && typeof source.data === "string") {
      return { inlineData: { mimeType: source.media_type || "image/png", data: source.data } };
    }
    if (source.type === "url" && typeof source.url === "string") return { fileData: { fileUri: source.url } };
  }
  if (b.type === "image_url") {
    const image = imageOf(b);
    if (image) return geminiPart(image);
  }
  return { text: placeholder(b).text };
}

const geminiParts = (content: unknown): Block[] =>
  blocks(content).map(geminiPart).filter((p) => !("text" in p) || p.text !== "");

/** Settled turns (see `settle`), without `system`, as Gemini `user` / `model` contents. */
export function geminiContents(settled: Settled[]): Row[] {
  const turns: { role: "user" | "model"; parts: Block[] }[] = [];
  const names = new Map<string, string>();
  const add = (role: "user" | "model", parts: Block[]): void => {
    if (!parts.length) return;
    const last = turns[turns.length - 1];
    if (last && last.role === role) last.parts.push(...parts);
    else turns.push({ role, parts });
  };
  for (const [turn, m] of settled) {
    if (turn === "user") add("user", geminiParts(m.content));
    else if (turn === "assistant") {
      const parts: Block[] = blocks(m.content).map((b) => ({ text: b.type === "text" ? b.text : placeholder(b).text }));
      for (const c of m.tool_calls) {
        names.set(c.id, c.name);
        parts.push({ functionCall: { id: c.id, name: c.name, args: toolInput(c) } });
      }
      add("model", parts);
    } else if (turn === "results") {
      add("user", m.map((r) => {
        const text = openaiText(r.content) || "(empty result)";
        return { functionResponse: { id: r.tool_call_id, name: names.get(r.tool_call_id) || r.name || "tool",
          response: r.is_error ? { error: text } : { output: text } } };
      }));
    } else if (turn === "journal") add("user", [{ text: journalText(m) }]);
    else if (turn === "orphan") add("user", [{ text: orphanText(m) }]);
  }
  if (turns.length && turns[0].role === "model") turns.unshift({ role: "user", parts: [{ text: CONTINUED }] });
  return turns;
}

/** The active view as Gemini's generateContent body: {systemInstruction?, contents}. */
export function toGeminiContents(view: Pick<ActiveView, "items"> & { handoff?: ActiveView["handoff"] },
                                 options: { journal?: JournalMode } = {}):
  { systemInstruction?: { parts: { text: string }[] }; contents: Row[] } {
  const journal = options.journal ?? "drop";
  checkMode(journal);
  const system = view.handoff ? [textOf(view.handoff.content)] : [];
  const settled = settle(messagesOf(view), { journal });
  system.push(...systemRows(settled));
  const kept = system.filter((s) => s.trim());
  let contents = geminiContents(settled.filter(([turn]) => turn !== "system"));
  if (!contents.length) {
    if (!kept.length) throw new NothingToSend();
    contents = [{ role: "user", parts: [{ text: CONTINUED }] }];
  }
  if (kept.length) return { systemInstruction: { parts: [{ text: kept.join("\n\n") }] }, contents };
  return { contents };
}

export type { Message };
