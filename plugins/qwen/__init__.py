"""Qwen Code (`qwen`): turns and answers from its session files (docs/agents.md, Qwen Code)."""
