"""The users of a tenant: the list and one user, with cheap counts of what they own."""
