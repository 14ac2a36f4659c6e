"""The built-in transforms: ``basic`` (raw, full-output, template) and ``llm`` (summary, ai-routing), with
their system prompts in ``prompts/``."""
