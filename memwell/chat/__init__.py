"""The thin chat path and the context assembly it shares with POST /v1/context."""
