"""The short-term tier: a token-budgeted buffer of each session's recent turns, in Redis."""
