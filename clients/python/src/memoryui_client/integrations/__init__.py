"""Framework adapters, each behind an optional extra of this package. The package is not on
PyPI yet: install it from a memoryui checkout, `pip install "./clients/python[claude]"`.

Each module imports its framework at the top (install the extra to use it) and builds
on `AsyncMemoryui` and `memoryui_client._core.Call`, never on Django:

- `memoryui_client.integrations.claude` — `[claude]`: a
  Claude Agent SDK `SessionStore` (`MemoryuiSessionStore`): project_key → namespace,
  session_id → external id, subagent transcripts → child conversations; batches
  appended with idempotency keys derived from the entries.
- `memoryui_client.integrations.openai_agents` — `[openai-agents]`: an OpenAI Agents SDK
  `Session` (`MemoryuiSession`): items kept verbatim, `get_items` the active view,
  `pop_item` takes an item back with a retraction record and `clear_session` restarts;
  neither destroys anything.
- `memoryui_client.integrations.langgraph` — `[langgraph]`: a LangGraph checkpointer
  (`MemoryuiSaver`, sync and async): checkpoints and writes kept byte for byte, each thread
  read as a conversation, subgraphs as child conversations, replays as forks.
- `memoryui_client.integrations.langchain` — `[langgraph]`: a LangChain chat history
  (`MemoryuiChatMessageHistory`); `clear()` starts a new, empty generation, erasing nothing.
- `memoryui_client.integrations.mcp_server` — `[mcp]`: the `memoryui-mcp` stdio server.
- `memoryui_client.integrations.pydantic_ai` — `[pydantic-ai]`: Pydantic AI message history
  (`MemoryuiMessageHistory`): `ModelMessage`s kept whole through `ModelMessagesTypeAdapter`
  in the meta of the readable rows they are shown as; `load` gives back exactly what was saved.

The mapping of each framework's records to memoryui's messages lives on the server
(`conversations/formats`), one mapping for importing files and for these adapters.
"""
