"""``ar``: plain autoregressive decoding, one target forward per token: the baseline every speed-up is
measured against. The smallest method: no draft, no options."""

from __future__ import annotations

from . import Method, register
from .speculative import run_speculative

register(Method(
    name="ar",
    summary="autoregressive: one target forward per token (the baseline)",
    lossy=False,
    options=None,
    start=lambda request, options: run_speculative(request, None, "ar"),
    draft="none",
    draft_words="plain decoding: no drafter",
    controller=False,
))
