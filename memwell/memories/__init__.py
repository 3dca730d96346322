"""One memory record and what a client does to it: get, delete, history, flags, erasure."""
