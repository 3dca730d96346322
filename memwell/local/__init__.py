"""The one-machine stack and the operator's command line: up, embedded services, demo, import."""
