"""Turns coming in: the contract, enqueue, the one module that sends to the broker, the
Redis inbox, the Postgres outbox, dead letters."""
