"""The examples at the end of each command's ``--help``: what a first-day user types, with what it does.

Kept here, apart from the parser, so that the parser stays readable and a test can check that every
command has some. Each example is one command line and a few words; lines stay within 80 columns.
"""

from __future__ import annotations

import argparse

__all__ = ["EXAMPLES", "ExamplesFormatter", "epilog"]

EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "": [
        ("baton demo", "see it work first: no API key, no agents, no routes.yaml needed"),
        ("baton check && baton up && baton run", "with your routes.yaml: validate, start, route"),
        ("baton status --watch", "the live board: who works, who waits for you"),
        ("baton COMMAND -h", "a command's options, with examples"),
    ],
    "run": [
        ("baton run", "route ./routes.yaml's tiles until Ctrl-C"),
        ("baton run --dry-run", "print the prompts instead of typing them"),
        ("baton run -c ~/work/routes.yaml -v", "another config, with debug logging"),
    ],
    "bus": [
        ("baton bus", "a bus for this machine only (127.0.0.1:4222)"),
        ("baton bus --listen 0.0.0.0", "one the other machines can reach"),
    ],
    "check": [
        ("baton check", "validate ./routes.yaml"),
        ("baton check -c other.yaml --json", "another file, the verdict as JSON"),
    ],
    "demo": [
        ("baton demo", "two demo agents hand work to each other, 4 times"),
        ("baton demo --handoffs 10 --work-s 0.2", "more hand-offs, quicker turns"),
        ("baton demo --keep", "leave its tmux server to look at (tmux -L <name> attach)"),
        ("baton demo --ask", "alice asks first: answer with the baton approve line it prints"),
        ("baton demo -L mydemo", "its tmux server named mydemo (a new one: a running server is refused)"),
    ],
    "send": [
        ('baton send reviewer "review src/auth.py"', "type it into tile reviewer's agent as baton run would"),
        ('baton send %3 "go on" --agent claude', "only if Claude Code runs in pane %3 (no tile declares it)"),
        ("git diff | baton send reviewer - --wait 60", "from standard input, once the agent is free"),
        ('baton send %4 "make test" --agent shell', "a command for the shell in pane %4"),
    ],
    "approve": [
        ("baton approve coder", "allow, once, what tile coder's agent asks permission for"),
        ("baton approve coder || baton resolve coder", "no prompt on screen: exit 1, nothing typed"),
    ],
    "deny": [
        ("baton deny coder", "refuse what tile coder's agent asks permission for"),
    ],
    "retry": [
        ("baton history --outcome failed --json | jq -r .key", "the keys of the failed hand-offs"),
        ("baton retry 'coder->reviewer@TURN'", "type that one again, with baton send's checks, once"),
    ],
    "hold": [
        ("baton hold review", "keep route review's hand-offs queued (the running daemon honours it)"),
        ("baton hold 'coder->reviewer'", "the same, named FROM->TO"),
    ],
    "resume": [
        ("baton resume review", "let them go: each queued hand-off is typed once"),
    ],
    "pass": [
        ("baton history --outcome awaiting --json | jq -r .key", "the hand-offs awaiting you"),
        ("baton pass 'release@TURN'", "let that one go: typed once its tile is ready"),
        ("$EDITOR p.txt && baton pass 'release@TURN' --text - < p.txt", "with the prompt edited"),
    ],
    "drop": [
        ("baton drop 'release@TURN'", "discard it: never typed"),
    ],
    "resolve": [
        ("baton resolve coder", "which agent, session and transcript tile coder's pane holds"),
        ("baton resolve %3", "the same for pane %3"),
        ("baton resolve title:coder --json", "the same for the pane titled coder, as JSON"),
        ("tmux display -p '#{pane_id}'", "(inside tmux: the id of the pane you are in)"),
    ],
    "up": [
        ("baton up", "create the panes of tiles with a `command:` and start them"),
        ("baton up --host gpu-box", "the tiles of another host in routes.yaml"),
    ],
    "status": [
        ("baton status", "every tile: pane, agent, state, last answer"),
        ("baton status --watch", "the live board (q or Ctrl-C quits, r looks again)"),
        ("baton status --json | jq '.[].state'", "for scripts"),
        ("baton status --all-hosts --watch", "every host's tiles, from the bus, live"),
    ],
    "web": [
        ("baton web", "the board in a browser: open the URL it prints (127.0.0.1 only)"),
        ("baton web --port 0", "any free port"),
        ("baton web --host 0.0.0.0 --public", "reachable from other machines: put TLS in front"),
    ],
    "extract": [
        ("baton extract ~/.claude/projects/-home-me-app/SESSION.jsonl", "Claude Code's last answer"),
        ("baton extract --agent codex ~/.codex/sessions/2026/12/03/rollout-….jsonl", "Codex's"),
        ("baton extract --agent opencode ~/.local/share/opencode/opencode.db", "OpenCode's"),
    ],
    "hooks install": [
        ("baton hooks install", "the hooks of every agent that has some"),
        ("baton hooks install --claude", "only Claude Code's Stop hook"),
    ],
    "preview": [
        ("baton preview 'coder->reviewer'", "what the route would hand on now"),
        ("echo 'All tests pass.' | baton preview review --input -", "for this answer (route review)"),
        ("baton preview review --dry-run", "an AI transform's request, without calling the model"),
    ],
    "history": [
        ("baton history", "the latest 50 hand-offs, and what AI transforms cost"),
        ("baton history --tile reviewer --since 2h", "those from or to reviewer in the last two hours"),
        ("baton history --outcome failed --since 1d", "what failed in the last day, why, and its retry"),
        ("baton history --route 'coder->reviewer' -n 5", "the last 5 of one route (its name, or FROM->TO)"),
        ("baton history -f", "every hand-off as it goes (Ctrl-C ends it)"),
        ("baton history --json --since 10m | tail -n 3", "for scripts: one JSON object per line"),
    ],
    "plugins": [
        ("baton plugins", "the agent adapters and transforms, and where they come from"),
        ("baton plugins --json", "the same, as JSON"),
    ],
}


def epilog(command: str) -> str | None:
    """The ``examples:`` block of ``command``'s help ("" for ``baton`` itself), or None when it has none."""
    examples = EXAMPLES.get(command)
    if not examples:
        return None
    return "examples:\n" + "\n".join(f"  {line}\n      {what}" for line, what in examples)


class ExamplesFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that an ``examples:`` block is printed as written (not re-wrapped)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:\n"):
            return text
        return super()._fill_text(text, width, indent)
