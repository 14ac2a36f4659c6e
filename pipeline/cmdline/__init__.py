"""The pieces every ``baton`` command shares, apart from the commands themselves (:mod:`pipeline.commands`):
argument types and shared options, the ``--help`` examples, which routes.yaml and tmux server a command
talks to, and the output helpers (tables, JSON)."""
