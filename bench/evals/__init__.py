"""Quality evaluations on real data (LoCoMo, MRPC), each beside a baseline."""
