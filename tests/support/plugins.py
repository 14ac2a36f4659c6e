"""Third-party plugins under test: one as someone else would publish it, installed as pip leaves it."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SHOUT", "install_plugin"]


SHOUT = '''\
"""A third-party batonpass plugin, as someone else would publish it."""
from pydantic import BaseModel, ConfigDict
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.transforms import Transform


class Shout(Transform):
    name = "shout"
    summary = "upper-cases the answer"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        suffix: str = "!"

    async def apply(self, data):
        if "crash" in data.response.text:
            raise RuntimeError("shout cannot handle this one")
        return data.response.text.upper() + self.options.suffix


@hookimpl
def register_transforms(register):
    register(Shout)
'''


def install_plugin(site: Path, module: str, source: str, dist: str, version: str, entry: str) -> None:
    """A real installed distribution with an entry point — the layout pip leaves in site-packages (the
    module plus its ``.dist-info`` with METADATA, entry_points.txt and RECORD) — in ``site``."""
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[batonpass]\n{entry} = {module}\n")
    (info / "top_level.txt").write_text(f"{module}\n")
    (info / "RECORD").write_text("".join(f"{name},,\n" for name in (
        f"{module}.py", f"{info.name}/METADATA", f"{info.name}/entry_points.txt", f"{info.name}/RECORD")))
