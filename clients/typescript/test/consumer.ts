// Compiled (not run) by the suite against the built package, as an app would import it:
// the published declarations resolve through the package's exports, and the plugs are what
// their frameworks expect. A line marked @ts-expect-error must stay an error.
import type { SessionStore } from "@anthropic-ai/claude-agent-sdk";
import type { Session } from "@openai/agents";
import type { ModelMessage } from "ai";

import { type ActiveView, InvalidInput, Memoryui, type Message, MemoryuiError, toAnthropicMessages,
  toOpenAIMessages } from "@memoryui/client";
import { StepPersister, toMemoryuiMessages, toModelMessages } from "@memoryui/client/ai";
import { MemoryuiSessionStore } from "@memoryui/client/claude-agent-sdk";
import { MemoryuiSession } from "@memoryui/client/openai-agents";

export async function consumer(view: ActiveView): Promise<void> {
  const mui = new Memoryui("http://127.0.0.1:8000", { apiKey: "mui_x", retries: { attempts: 3 } });
  const message: Message = { kind: "assistant", tool_calls: [{ id: "c1", name: "lookup", arguments: { n: 1 } }] };
  // @ts-expect-error: a tool row needs its tool_call_id
  const wrong: Message = { kind: "tool", content: "ok" };
  const appended = await mui.append("id", message, { expectedPosition: 0, idempotencyKey: "k" });
  const position: number = appended.position;
  // @ts-expect-error: the answer has no such field
  void appended.positon;
  const openai: Record<string, unknown>[] = toOpenAIMessages(view);
  const { system, messages } = toAnthropicMessages(view, { journal: "text" });
  // An all-projects key names its project; a project's key needs none.
  const store: SessionStore = new MemoryuiSessionStore(undefined, { namespacePrefix: "app/", project: "support" });
  const session: Session = new MemoryuiSession("user-42", { namespace: "agents", project: "support" });
  const named: string | null = new Memoryui(undefined, { project: "support" }).project;
  const model: ModelMessage[] = toModelMessages(view);
  const rows: Message[] = toMemoryuiMessages(model);
  const persister = new StepPersister(mui, "id");
  try {
    await mui.get("id");
  } catch (error) {
    if (error instanceof InvalidInput) console.log(error.field);
    if (error instanceof MemoryuiError) console.log(error.code, error.status);
  }
  void [wrong, position, openai, system, messages, store, session, named, rows, persister];
}
