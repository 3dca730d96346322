"""Who is calling and how much they may send: API keys, their cache, the per-key rate
limit, size limits."""
