"""The built-in transforms that need no model: ``raw``, ``full-output`` and ``template``."""

from __future__ import annotations

import string

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.plugin import RegisterTransform
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.transforms import Transform, TransformInput, TransformSkipped

__all__ = ["FullOutput", "Raw", "Template"]


def _not_empty(text: str, why: str) -> str:
    """An empty hand-off is skipped with its reason, not typed (the target would get a bare Enter)."""
    if not text.strip():
        raise TransformSkipped(why)
    return text


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RawOptions(_Options):
    lines: int | None = Field(default=None, gt=0, description="keep only the last N lines")


class Raw(Transform[RawOptions]):
    """The response as it is."""

    name = "raw"
    summary = "the response as is (option lines: keep the last N lines)"
    Options = RawOptions

    async def apply(self, data: TransformInput) -> str:
        text = data.response.text
        if self.options.lines is not None:
            text = "\n".join(text.rstrip("\n").split("\n")[-self.options.lines :])
        return _not_empty(text, "the response is empty")


class FullOutputOptions(_Options):
    max_chars: int | None = Field(default=None, gt=0, description="keep only the last N characters")


class FullOutput(Transform[FullOutputOptions]):
    """Everything the turn printed in the source pane, ANSI-stripped."""

    name = "full-output"
    summary = "everything the turn printed in the source pane, ANSI-stripped (option max_chars)"
    Options = FullOutputOptions

    async def apply(self, data: TransformInput) -> str:
        text = (await data.terminal_text()).strip("\n")
        if self.options.max_chars is not None and len(text) > self.options.max_chars:
            text = text[-self.options.max_chars :]
        return _not_empty(text, "the turn printed nothing")


TEMPLATE_FIELDS = ("response", "responses", "answers[TILE]", "source", "target", "route", "cwd")


def _known(field: str) -> bool:
    """A placeholder the template fills: a plain field, or ``answers[TILE]`` (one source's answer)."""
    if field.startswith("answers[") and field.endswith("]") and field.count("[") == 1 and len(field) > 9:
        return True
    return field in TEMPLATE_FIELDS and "[" not in field


class _Answers(dict[str, str]):
    """``{answers[x]}`` of a source that did not answer (a join's group that timed out) says so."""

    def __missing__(self, tile: str) -> str:
        return f"({tile} did not answer)"


class TemplateOptions(_Options):
    template: str

    @field_validator("template")
    @classmethod
    def _known_fields(cls, value: str) -> str:
        try:
            parsed = list(string.Formatter().parse(value))
        except ValueError as exc:
            raise ValueError(f"bad template ({exc}); write a literal brace as {{{{ or }}}}") from None
        for _, field, _, _ in parsed:
            if field is not None and not _known(field):
                raise ValueError(
                    f"unknown placeholder {{{field}}}; use "
                    f"{', '.join('{%s}' % f for f in TEMPLATE_FIELDS)}"
                    " (a literal brace is {{ or }})"
                )
        return value


class Template(Transform[TemplateOptions]):
    """A template with ``{response}``, ``{source}``, ``{target}``, ``{route}``, ``{cwd}``; for a join,
    ``{responses}`` (every answer of the group under a ``## <tile>`` heading, as ``{response}`` is then)
    and ``{answers[TILE]}`` (one source's answer)."""

    name = "template"
    summary = "a template: {response} {source} {target} {route} {cwd}, a join's {responses} {answers[TILE]}"
    Options = TemplateOptions

    async def apply(self, data: TransformInput) -> str:
        return self.options.template.format(
            response=data.response.text, responses=data.response.text, answers=_Answers(data.answers),
            source=data.source, target=data.target, route=data.route, cwd=data.cwd or "")


@hookimpl
def register_transforms(register: RegisterTransform) -> None:
    register(Raw)
    register(FullOutput)
    register(Template)
