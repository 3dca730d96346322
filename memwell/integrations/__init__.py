"""Memwell inside agent frameworks: each module is a thin skin over the Python SDK
(`memwell.sdk`) for one framework's memory interface, and needs its own extra:

- `memwell.integrations.langgraph`: a LangGraph `BaseStore` (`memwell[langgraph]`);
- `memwell.integrations.langchain`: a chat message history and a retriever
  (`memwell[langchain]`);
- `memwell.integrations.llamaindex`: a memory block for `llama_index.core.memory.Memory`
  (`memwell[llamaindex]`);
- `memwell.integrations.openai_agents`: a `Session` and the `remember` / `recall` tools
  for the OpenAI Agents SDK (`memwell[openai-agents]`).

Tenancy is the API key's: an adapter sees exactly what its client's key may see.
Nothing in memwell imports this package.
"""
