"""A draft that copies from the context never copies the chat template's own tokens (#48: round 1 of the page's
default example drafted ``<|im_start|>ass istant ↵``, the template's assistant header copied from the prompt, and
the target refused it)."""

from __future__ import annotations

import pytest

import explorer
from explorer.engine.drafters import KEEP_DRAFTING, ChatFrame, PromptLookupDrafter, template_free
from explorer.engine.sampling import SamplingConfig

# a ChatML-like template in made-up ids: <s>=1, <e>=2, "\n"=10, "system"=11, "user"=12, "ass"=13, "istant"=14
START, END, NL = 1, 2, 10
BEFORE = [START, 11, NL, 40, 41, 42, END, NL, START, 12, NL]  # the system turn, then the user's header
AFTER = [END, NL, START, 13, 14, NL]  # the end of the user's turn, the assistant's header
TEMPLATE = set(BEFORE + AFTER)


def encode_chat(text: str) -> list[int]:
    return BEFORE + [100 + ord(c) % 50 for c in text] + AFTER


def test_the_frame_is_what_every_message_shares():
    frame = ChatFrame.of(encode_chat)
    assert frame == ChatFrame(tuple(BEFORE), tuple(AFTER))
    prompt = encode_chat("Summarise this.\nThen stop.")
    assert frame.spans(prompt) == [(0, len(BEFORE)), (len(prompt) - len(AFTER), len(prompt))]
    assert frame.spans([100, 101] + prompt) == []  # a context that does not open with it: nothing is template
    assert ChatFrame.of(lambda text: [ord(c) for c in text]) is None  # no template at all
    assert template_free([(0, 3), (8, 10)], 4, 12) == 4 and template_free([(0, 3)], 1, 5) == 0


def test_prompt_lookup_never_drafts_the_templates_tokens():
    # the user's text has a newline in it (id 10, as the template's), followed by words worth copying
    user = [100, 101, NL, 102, 103, 104]
    prompt = BEFORE + user + AFTER
    cfg = SamplingConfig(temperature=0.0)
    bare = PromptLookupDrafter(3).propose(prompt, 4, cfg, None, KEEP_DRAFTING).tokens
    assert set(bare) & TEMPLATE  # without the frame, round 1 copies the template (what the page showed)
    framed = PromptLookupDrafter(3, ChatFrame(tuple(BEFORE), tuple(AFTER)))
    drafted = framed.propose(prompt, 4, cfg, None, KEEP_DRAFTING).tokens
    assert drafted == [102, 103, 104]  # what followed the user's own newline, cut before the template
    # later, in the answer, the same holds: a match in the answer still copies, never into the template
    context = prompt + [100, 101, NL]
    assert framed.propose(context, 4, cfg, None, KEEP_DRAFTING).tokens == [102, 103, 104]


@pytest.mark.model
@pytest.mark.parametrize("method, draft", [("speculative", "prompt-lookup:3"), ("suffix", None)])
def test_the_default_examples_first_round_drafts_no_template_token(default_model, method, draft):
    from explorer.ui.examples import AMAZON

    frame = ChatFrame.of(lambda text: default_model.encode(text, chat=True))
    assert default_model.tokenizer.convert_tokens_to_ids("<|im_start|>") in frame.before + frame.after
    run = explorer.decode(default_model, f"Summarise this text in two sentences:\n\n{AMAZON}", method=method,
                          draft=draft, max_new_tokens=24)
    drafted = [t for r in run.rounds for t in (r.drafted or [n["token"] for n in (r.tree or {}).get("nodes", ())])]
    special = set(default_model.tokenizer.all_special_ids)
    assert not set(drafted) & special  # no <|im_start|>, <|im_end|>, end of text
    first = run.rounds[0]
    first_drafts = first.drafted or [n["token"] for n in (first.tree or {}).get("nodes", ())]
    assert "assistant" not in default_model.decode(list(first_drafts)).replace(" ", "")  # the header, copied
