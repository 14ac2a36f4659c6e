"""The system prompts of the LLM transforms, shipped as readable text (one ``NAME.md`` each)."""
