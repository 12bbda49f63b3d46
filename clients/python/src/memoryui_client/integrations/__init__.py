"""Framework adapters, each behind an optional extra of this package.

Where they go (each module imports its framework lazily and builds on `Memoryui` /
`AsyncMemoryui` and `memoryui_client._core.Call`, never on Django):

- `memoryui_client.integrations.claude` — `pip install "./clients/python[claude]"`:
  a Claude Agent SDK SessionStore (project_key → namespace, session_id → external_id,
  appends through `append_batch` with idempotency keys derived from the entries).
- `memoryui_client.integrations.openai_agents` — `[openai-agents]`: an OpenAI Agents SDK Session.
- `memoryui_client.integrations.mcp` — `[mcp]`: the `memoryui-mcp` stdio server.

An adapter that must survive its own process restarting passes its own
`idempotency_key=` (derived from business values: session, entry uuid) to each write,
so that a retry after a restart is still recognised by the server.
"""
