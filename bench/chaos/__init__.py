"""Fault injection and hostile input against real processes."""
