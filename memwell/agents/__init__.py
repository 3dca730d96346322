"""The MCP server: memory as tools for agents, a thin skin over the domain services."""
