"""Low-level helpers that talk to the system: tmux (the only module that runs it), /proc, terminal text,
JSONL files and logging. No knowledge of routes or agents."""
