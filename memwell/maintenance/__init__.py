"""Maintenance: the beat jobs (decay, prune, idle-session close, sweep) as plain
functions. Each works in bounded, keyset-paged batches that lock with SKIP LOCKED,
takes its clock as a `now` argument, and can run dry. Tasks and the CLI call them."""
