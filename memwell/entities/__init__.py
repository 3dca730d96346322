"""Entity memory: who and what a user's memories mention, and how they relate.

`extract` turns one memory's text into mentions and relation facts (locally, by rules);
`query_keys` names the entity keys a search query may refer to; `store` writes them
to the entity tables in the consolidation transaction.
"""
