"""Performance figures: each prints a table beside its floors measured in the same run."""
