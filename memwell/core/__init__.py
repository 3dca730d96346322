"""What every domain shares: settings, errors, logs, metrics, queue names, token counting."""
