"""The demo agent: ``agent`` (a tiny agent program run in a pane, no API key) and ``adapter`` (its tile)."""
