"""Memwell beside its peers on LoCoMo (`python -m bench.peers`): the same conversations,
questions and embeddings, each system on a Postgres of its own; recall and search cost
in one table."""
