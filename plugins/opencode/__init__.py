"""OpenCode: ``adapter`` (the tile), ``resolve`` (pane → process → session in the store), ``reader``
(the SQLite store)."""
