"""Cline CLI adapter (docs/agents.md, Cline)."""
