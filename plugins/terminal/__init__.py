"""The screen-reading adapters: the generic terminal fallback, ``shell`` tiles and ``amp``."""
