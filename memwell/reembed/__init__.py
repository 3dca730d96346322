"""Re-embed: move a store (a tenant, a user) to another embedding model without downtime.

The target model's vectors are written beside the current ones (`memory_embeddings`)
by a resumable walk on the maintenance queue; each user switches to them, in one
transaction, once all their rows have one. Searches and writes route per user
(`routing`), so every user is searchable throughout. `finish` makes the target the
default and drops the old vectors after a grace period; `abort` swaps every
switched user back and leaves the store as it was.
"""
