"""GitHub Copilot CLI adapter (docs/agents.md, GitHub Copilot CLI)."""
