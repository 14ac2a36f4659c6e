"""Gemini CLI (``@google/gemini-cli``): the adapter is :mod:`plugins.gemini.adapter`."""
