"""The transforms that ask a model: ``summary`` and ``ai-routing``, on the Anthropic Messages API.

Both read the source's clean answer and send it, with a system prompt shipped as readable text in
``plugins/prompts/``, to ``anthropic.AsyncAnthropic`` (which reads ``ANTHROPIC_API_KEY`` and
``ANTHROPIC_BASE_URL`` itself). Model, ``max_tokens`` and ``timeout_s`` come from ``settings.llm`` (this
plugin's own section, :class:`LLMSettings`, registered with ``register_settings``) and can be overridden per
route.

A failed call never loses the hand-off: with no key, a timeout, an API error, an answer that is no Messages
response (a proxy's page, a JSON string), no text block or an empty answer — any failure of the call — the
transform hands on the raw answer (``on_error: raw``, the default) or skips the hand-off (``on_error: skip``),
logs why, and returns the reason as the :class:`TransformResult` note (the router copies it to
``Prompt.note`` for the journal).

Every call that the API answered returns its token use (and its cost, from :mod:`plugins.transforms.prices`)
as the result's ``usage``, which the journal keeps with the hand-off: ``baton history`` shows it.
"""

from __future__ import annotations

import logging
import os
from importlib import resources
from typing import Any, ClassVar, Literal, TypeVar

import anyio
import orjson
from anyio.lowlevel import RunVar
from pydantic import BaseModel, ConfigDict, Field

from pipeline.plugin import PluginSettings, RegisterSettings, RegisterTransform, SettingsSection
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.transforms import Transform, TransformInput, TransformResult, TransformSkipped, Usage
from plugins.transforms.choose import TOOL, ChoiceRefused, choice_message, hand_off_tool, read_choice
from plugins.transforms.prices import usage_of

__all__ = [
    "API_KEY_ENV",
    "CHARS_PER_TOKEN",
    "DEFAULT_MAX_INPUT_CHARS",
    "MAX_CONCURRENT_CALLS",
    "AIRouting",
    "LLMSettings",
    "LLMTransform",
    "Summary",
    "call_limiter",
    "cut_middle",
    "system_prompt",
]

log = logging.getLogger("batonpass")

API_KEY_ENV = "ANTHROPIC_API_KEY"
#: A deliberately low estimate of characters per token: English prose averages about 4, code and
#: non-Latin scripts fewer. Estimating low cuts a little early rather than overflowing the window.
CHARS_PER_TOKEN = 3
#: The share of Claude's 200k-token context an answer may take; the rest is for the system prompt, the
#: route's instructions and the reply.
DEFAULT_INPUT_TOKENS = 100_000
DEFAULT_MAX_INPUT_CHARS = DEFAULT_INPUT_TOKENS * CHARS_PER_TOKEN
#: At most this many model calls at once in one process, whatever the number of routes.
MAX_CONCURRENT_CALLS = 4
#: The SDK retries 408/409/429/5xx and dropped connections itself, with backoff, within ``timeout_s``.
MAX_RETRIES = 2

_limiter: RunVar[anyio.CapacityLimiter] = RunVar("batonpass_llm_limiter")


def call_limiter() -> anyio.CapacityLimiter:
    """The limiter shared by every LLM transform of this process. One per event loop, because anyio
    primitives belong to the loop that made them (``baton preview`` and tests each run their own)."""
    try:
        return _limiter.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(MAX_CONCURRENT_CALLS)
        _limiter.set(limiter)
        return limiter


def system_prompt(name: str) -> str:
    """The system prompt shipped as ``plugins/prompts/NAME.md``."""
    return resources.files("plugins.transforms.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")


def cut_middle(text: str, max_chars: int) -> tuple[str, int]:
    """``text`` with its middle replaced by a visible marker when it is longer than ``max_chars``.

    The first and last halves of the budget are kept: an agent's answer usually states its task at the
    top and its outcome at the bottom. Returns the text and how many characters were cut.
    """
    if len(text) <= max_chars:
        return text, 0
    cut = len(text) - max_chars
    head = max_chars // 2
    tail = max_chars - head
    return f"{text[:head]}\n\n[… {cut} characters cut by batonpass …]\n\n{text[len(text) - tail:]}", cut


# numbers are strict: `true` or "600" is a mistake in routes.yaml, not the number 1 or 600
class LLMSettings(SettingsSection):
    """``settings.llm`` in routes.yaml: what every LLM transform uses unless its route says otherwise."""

    section = "llm"

    model: str = "claude-sonnet-4-5"
    max_tokens: int = Field(default=1024, gt=0, strict=True)
    timeout_s: float = Field(default=60, gt=0, allow_inf_nan=False, strict=True)


class LLMOptions(BaseModel):
    """Options every LLM transform takes; ``model``, ``max_tokens`` and ``timeout_s`` default to
    ``settings.llm``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instructions: str = Field(default="", description="what this hand-off is for, in your words")
    model: str | None = Field(default=None, description="overrides settings.llm.model")
    max_tokens: int | None = Field(default=None, gt=0, description="overrides settings.llm.max_tokens")
    timeout_s: float | None = Field(default=None, gt=0, description="overrides settings.llm.timeout_s")
    on_error: Literal["raw", "skip"] = Field(
        default="raw",
        description="when the model cannot answer: hand on the raw answer, or skip the hand-off",
    )
    max_input_chars: int = Field(
        default=DEFAULT_MAX_INPUT_CHARS, gt=0,
        description=f"longer answers are cut in the middle, with a marker (default ≈ {DEFAULT_INPUT_TOKENS} "
                    f"tokens at {CHARS_PER_TOKEN} characters per token)")


LLMOptionsT = TypeVar("LLMOptionsT", bound=LLMOptions)


class LLMTransform(Transform[LLMOptionsT]):
    """Base of the transforms that ask a model. Subclasses name their prompt file and build the user
    message; the call, the limits and the fallbacks are here."""

    needs_api_key_env = API_KEY_ENV
    Options: ClassVar[type[BaseModel]] = LLMOptions
    #: the system prompt file under ``plugins/prompts/``, without ``.md``
    prompt_name: ClassVar[str] = ""

    def __init__(self, options: LLMOptionsT) -> None:
        super().__init__(options)
        self.llm = LLMSettings()
        self.system = system_prompt(self.prompt_name)

    def configure(self, settings: PluginSettings) -> None:
        self.llm = settings.section(LLMSettings)

    @property
    def model(self) -> str:
        return self.options.model or self.llm.model

    @property
    def max_tokens(self) -> int:
        return self.options.max_tokens or self.llm.max_tokens

    @property
    def timeout_s(self) -> float:
        return self.options.timeout_s or self.llm.timeout_s

    def user_message(self, data: TransformInput, answer: str) -> str:
        raise NotImplementedError

    def request(self, data: TransformInput) -> tuple[dict[str, Any], int]:
        """The Messages API request for ``data`` (keyword arguments of ``messages.create``), and how many
        characters of the answer were cut to fit ``max_input_chars``."""
        answer, cut = cut_middle(data.response.text.strip("\n"), self.options.max_input_chars)
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            # the system prompt is the same for every call of this transform: cache it
            "system": [{"type": "text", "text": self.system, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": self.user_message(data, answer)}],
        }, cut

    def dry_run(self, data: TransformInput) -> str:
        request, _ = self.request(data)
        return (
            f"model: {request['model']}\nmax_tokens: {request['max_tokens']}\ntimeout_s: {self.timeout_s}\n"
            f"--- system (cache_control: ephemeral) ---\n{request['system'][0]['text'].rstrip()}\n"
            f"--- user ---\n{request['messages'][0]['content']}\n"
            + "".join(f"--- tool {t['name']} (the model must call it) ---\n"
                      f"{orjson.dumps(t['input_schema']).decode()}\n" for t in request.get("tools", []))
        )

    async def apply(self, data: TransformInput) -> TransformResult:
        if not data.response.text.strip():
            raise TransformSkipped("the response is empty")
        where = f"route {data.route}: {self.name} on turn {data.response.completion.turn_id}"
        request, cut = self.request(data)
        notes = []
        if cut:
            notes.append(f"{cut} characters cut from the middle of the answer (max_input_chars="
                         f"{self.options.max_input_chars})")
            log.warning("%s: the answer has %d characters; %s", where, len(data.response.text), notes[-1])
        if not os.environ.get(API_KEY_ENV):
            return self._fall_back(data, where, f"{API_KEY_ENV} is not set", notes)
        try:
            message = await self._ask(request)
            text, stop_reason, usage = read_message(message, request["model"])
        except Exception as exc:  # any failure of the call, whatever its shape: the answer is not lost
            return self._fall_back(data, where, self._why_failed(exc), notes)
        return self.result_of(data, where, message, (text, stop_reason, usage), notes)

    def result_of(self, data: TransformInput, where: str, message: Any,
                  read: tuple[str, str | None, Usage], notes: list[str]) -> TransformResult:
        """The hand-off's text from the model's answer (``read``: its text, stop reason and usage)."""
        text, stop_reason, usage = read
        if not text:
            return self._fall_back(data, where, f"{self.model} returned no text (stop_reason: {stop_reason})",
                                   notes, usage)
        if stop_reason == "max_tokens":
            notes.append(f"the model's text stopped at max_tokens={self.max_tokens}")
            log.warning("%s: %s", where, notes[-1])
        log.info("%s: %d chars from %s (%d tokens in, %d out%s)", where, len(text), usage.model,
                 usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens, usage.output_tokens,
                 "" if usage.cost_usd is None else f", ${usage.cost_usd:.4f}")
        return TransformResult(text, note="; ".join(notes), usage=usage)

    def _why_failed(self, exc: Exception) -> str:
        """One line on why the model call failed, for the log and ``baton history``."""
        import anthropic  # here, not at the top: it costs ~1 s of start-up to every `baton` command

        if isinstance(exc, TimeoutError):
            return f"no answer from {self.model} within timeout_s={self.timeout_s:g}"
        if isinstance(exc, anthropic.APIStatusError):
            return f"the API answered HTTP {exc.status_code}: {_api_message(exc)}"
        if isinstance(exc, anthropic.APIConnectionError):
            base = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
            return f"cannot reach the API at {base}: {exc}"
        if isinstance(exc, anthropic.AnthropicError):
            return f"{type(exc).__name__}: {exc}"
        if isinstance(exc, NotAMessage | ChoiceRefused):
            return str(exc)
        return f"the API's answer could not be read ({type(exc).__name__}: {exc})"  # a body that is no JSON

    async def _ask(self, request: dict[str, Any]) -> Any:
        """One call, bounded by the shared limiter (waiting for a slot does not count against the
        timeout) and by ``timeout_s`` (retries included). A client per call: hand-offs are seconds apart,
        and a client outlives no event loop it was not made in."""
        import anthropic

        async with call_limiter():
            with anyio.fail_after(self.timeout_s):
                async with anthropic.AsyncAnthropic(
                    timeout=self.timeout_s, max_retries=MAX_RETRIES
                ) as client:
                    return await client.messages.create(**request)

    def _fall_back(self, data: TransformInput, where: str, reason: str, notes: list[str],
                   usage: Usage | None = None) -> TransformResult:
        if self.options.on_error == "skip":
            raise TransformSkipped(f"{self.name} could not run: {reason} (on_error: skip)")
        log.warning("%s: %s; handing on the raw answer instead (on_error: raw)", where, reason)
        note = f"{self.name} fell back to the raw answer: {reason}"
        return TransformResult(data.response.text, note="; ".join([note, *notes]), usage=usage)


class NotAMessage(Exception):
    """The API answered (HTTP 200) with something that is no Messages response."""


_JSON_KINDS = {str: "a string", int: "a number", float: "a number", list: "a list", dict: "an object"}


def read_message(message: Any, model: str) -> tuple[str, str | None, Usage]:
    """The text, stop reason and usage of what ``messages.create`` returned, read without trusting its
    shape: the SDK hands back whatever JSON a server (or a proxy in front of it) sent with a 200.
    Raises :class:`NotAMessage` when it has no content list; a list without a text block is no text."""
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        if message is None or isinstance(message, str | int | float | list | dict):
            what = _JSON_KINDS.get(type(message), "null")
        else:
            what = "no content" if content is None else f"content that is a {type(content).__name__}"
        raise NotAMessage(f"the API answered HTTP 200 with no Messages response: {what}")
    texts = (getattr(block, "text", None) for block in content if getattr(block, "type", None) == "text")
    text = "".join(t for t in texts if isinstance(t, str)).strip()
    stop = getattr(message, "stop_reason", None)
    named = getattr(message, "model", None)
    return (text, stop if isinstance(stop, str) else None,
            usage_of(named if isinstance(named, str) and named else model, getattr(message, "usage", None)))


def _api_message(exc: Any) -> str:
    """The message of an ``anthropic.APIStatusError``'s error body."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict) and body["error"].get("message"):
        return f"{body['error'].get('type', 'error')}: {body['error']['message']}"
    return exc.message


def _tile_line(role: str, tile: str, agent: str, description: str) -> str:
    return f"{role}: tile {tile!r}, agent {agent}" + (f" — {description}" if description else "")


class AIRouting(LLMTransform[LLMOptions]):
    """The model reads the source's answer and writes the target's next prompt, ready to paste; on a
    route with ``to: {choose: [...]}`` it also picks the target, in the same call (:mod:`.choose`)."""

    name = "ai-routing"
    summary = ("an LLM-written prompt for the target agent, or for the one it picks from to: {choose} "
               "(options instructions, model, on_error)")
    prompt_name = "ai-routing"

    def request(self, data: TransformInput) -> tuple[dict[str, Any], int]:
        request, cut = super().request(data)
        if data.choices:  # one forced tool call: the tile and its prompt, structured
            request["tools"] = [hand_off_tool(data.choices)]
            request["tool_choice"] = {"type": "tool", "name": TOOL}
        return request, cut

    def result_of(self, data: TransformInput, where: str, message: Any,
                  read: tuple[str, str | None, Usage], notes: list[str]) -> TransformResult:
        if not data.choices:
            return super().result_of(data, where, message, read, notes)
        usage = read[2]
        try:
            target, prompt, why = read_choice(message, data.choices)
        except ChoiceRefused as exc:
            return self._fall_back(data, where, str(exc), notes, usage)
        notes.insert(0, f"the model chose {target}" + (f": {why}" if why else ""))
        log.info("%s: %s (%d chars from %s)", where, notes[0], len(prompt), usage.model)
        return TransformResult(prompt, note="; ".join(notes), usage=usage, target=target)

    def user_message(self, data: TransformInput, answer: str) -> str:
        if data.choices:
            return choice_message(data, answer, self._instructions())
        handoff = [
            _tile_line("source", data.source, data.source_agent, data.source_description),
            _tile_line("target", data.target, data.target_agent, data.target_description),
            f"the source's turn: {data.response.completion.outcome}",
        ]
        if data.cwd:
            handoff.append(f"the source's working directory: {data.cwd}")
        return (f"<handoff route=\"{data.route}\">\n" + "\n".join(handoff) + "\n</handoff>\n\n"
                f"<instructions>\n{self._instructions()}\n</instructions>\n\n"
                f"<answer>\n{answer}\n</answer>\n\n"
                f"Write the prompt for the target, {data.target!r}, now.")

    def _instructions(self) -> str:
        return self.options.instructions.strip() or "(none: write the natural next step for the target)"


class SummaryOptions(LLMOptions):
    max_words: int = Field(default=150, gt=0, description="the summary's length limit")


class Summary(LLMTransform[SummaryOptions]):
    """A faithful summary of the source's answer within ``max_words``."""

    name = "summary"
    summary = "an LLM summary of the response (options max_words, instructions, model, on_error)"
    prompt_name = "summary"
    Options = SummaryOptions

    def user_message(self, data: TransformInput, answer: str) -> str:
        text = f"<answer from=\"{data.source}\" agent=\"{data.source_agent}\">\n{answer}\n</answer>\n\n"
        if self.options.instructions.strip():
            text += f"<instructions>\n{self.options.instructions.strip()}\n</instructions>\n\n"
        return text + f"Summarise the answer in at most {self.options.max_words} words."


@hookimpl
def register_transforms(register: RegisterTransform) -> None:
    register(Summary)
    register(AIRouting)


@hookimpl
def register_settings(register: RegisterSettings) -> None:
    register(LLMSettings)
