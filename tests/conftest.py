"""The suite's plugins and session hooks. Fixtures and helpers live in :mod:`tests.support`; the modules
that define fixtures are registered here, and a test imports helpers from ``tests.support.*``, never from
another test module or from this file (tests/test_lint.py checks it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys

import psutil
import pytest

# the helpers' own asserts report like a test's (registered before the modules are first imported)
pytest.register_assert_rewrite("tests.support")

from pipeline.system.tmux import Tmux, remove_socket_file  # noqa: E402
from tests.support.polling import wait_for  # noqa: E402
from tests.support.tmux import SOCKET_PREFIX, left_behind  # noqa: E402

pytest_plugins = [
    "tests.support.environment",
    "tests.support.tmux",
    "tests.support.daemons",
    "tests.support.bus",
    "tests.support.transforms",
    "tests.support.web",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if shutil.which("tmux") is None:
        skip = pytest.mark.skip(reason="tmux is not installed")
        for item in items:
            if "tmux" in item.keywords:
                item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite leaves no tmux server, client or socket behind, nor a batonpass process: what it finds
    (its own only) is listed, ended and removed, and the run fails."""
    with contextlib.suppress(AssertionError):  # a server killed by the last test may take a moment to go
        wait_for(lambda: not left_behind(), timeout=5.0, what="the last test's processes to end")
    procs = left_behind()
    names = {f"baton-demo-{os.getpid()}"}  # the demo, run in this process
    for args in procs.values():  # and every server name a process left behind was given
        names |= {value for flag, value in zip(args, args[1:], strict=False) if flag == "-L"}
    folder = Tmux(socket_name="x").socket_file.parent
    sockets = sorted(p for p in folder.glob("*") if p.name.startswith(SOCKET_PREFIX) or p.name in names)
    if not procs and not sockets:
        return
    lines = []
    clients_first = sorted(procs.items(), key=lambda item: "attach-session" not in item[1])
    for proc, args in clients_first:
        lines.append(f"  process {proc.pid}: {' '.join(args)[:160]}")
        with contextlib.suppress(psutil.Error):
            proc.kill()
            proc.wait(timeout=5)
    for path in sockets:
        lines.append(f"  socket {path}")
        remove_socket_file(path)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "the test run left these behind (now ended and removed)", red=True)
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# hypothesis: quick in CI; `HYPOTHESIS_PROFILE=fuzz pytest tests/test_hostile_input.py` for the long run
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("default", max_examples=150, deadline=None)
_hypothesis_settings.register_profile("fuzz", max_examples=int(os.environ.get("BATON_FUZZ_CASES", "100000")),
                                     deadline=None)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
