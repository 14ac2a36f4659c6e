"""Claude Code: ``adapter`` (the tile), ``resolve`` (pane → process → session file → transcript),
``reader`` (transcript JSONL), ``hooks`` (the Stop hook), ``screen`` (the terminal fallback)."""
