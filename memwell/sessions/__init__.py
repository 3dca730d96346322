"""A user's sessions: the list, one session with its buffer, closing and deleting one."""
