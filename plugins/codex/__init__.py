"""Codex: ``adapter`` (the tile), ``resolve`` (pane → process → rollout), ``reader`` (rollout JSONL),
``hooks`` (``notify`` in config.toml), ``screen`` (the composer and the terminal fallback)."""
