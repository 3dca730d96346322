"""What the benchmarks share: stacks, load generators, data readers, report rows."""
