"""Shared test helpers: services, factories, waiting, the fake OpenAI-compatible server."""
