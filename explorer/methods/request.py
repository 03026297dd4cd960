"""What every run of a method starts from (``Request``), and a method's memory of a session's earlier runs
(``SessionState``): the two things the API and the page hand a method, whichever it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..engine.sampling import Rng, SamplingConfig
from ..models import LoadedModel
from ..trace import Settings

API_SESSION_PREFIX = "api:"  # a public-API caller's session (``ui.session.history_session``): one that may open a
#                              session per call, so a method keeping per-session state lets those go first (issue 40)


@dataclass
class Request:
    """What every method starts from, resolved and checked by ``explorer.api.stream``."""

    target: LoadedModel
    prompt: str | None
    prompt_ids: list[int]
    sampling: SamplingConfig
    settings: Settings  # the common knobs; a method replaces what it decides itself (BiLD's γ is its cap)
    draft: Any  # the draft's spec or model object (None where the method takes none)
    load: Callable[[Any], LoadedModel]  # model spec or object -> loaded model (shared, cached)
    round_tokens: Callable[[Any], list[int]] | None = None  # the method record's: ids a round names (its trace)
    session: str = ""  # who is decoding (the page's session): a method that learns from earlier runs keeps it apart

    @property
    def seed(self) -> int:
        return self.settings.seed

    def rng(self) -> Rng:
        return Rng(self.settings.seed)


@dataclass(frozen=True)
class SessionState:
    """What a method keeps of a session's earlier runs (``suffix``: its finished outputs), as plain data that crosses
    a process boundary: a GPU worker (``ui.zerogpu``) is handed ``export(session)`` and hands back what
    ``replace(session, data)`` makes the session's again. vLLM keeps a proposer's state in the proposer; here the
    method's record reaches it, so the page and the workers name no method."""

    export: Callable[[str | None], Any]
    replace: Callable[[str | None, Any], None]
