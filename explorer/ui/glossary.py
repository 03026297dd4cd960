"""The page's glossary: every word and symbol the page uses, in plain words (shown folded under the run).

The words every run shares are here; each method's and each draft kind's own words are in its record
(``Method.glossary``, ``DraftKind.glossary``), so a new method brings its words with it."""

from explorer import drafts, methods

GLOSSARY = """
**Target model**: the model whose output we want. **Draft (drafter)**: something cheaper that guesses the
target's next tokens (the kinds are listed at the end).

**Round**: the draft proposes γ tokens, the target checks all of them in **one** forward pass (a
*verification*), and the longest run of drafts it agrees with is kept. **γ (gamma)**: drafts per round.

Token fates: **accepted** (a draft the target agreed with) · **rejected** (the first draft it refused) ·
**discarded** (drafts after a rejection, or after an end-of-text token: never checked) · **corrected**
(the target's own token in place of the rejected draft) · **bonus** (the extra token the target adds when
it accepted every draft) · **target** (a token from a round with no draft) · **copy** (a token the target's
4-bit copy wrote alone, with no target checking it: `quantized` with the copy's role *alone*, lossy).

**p / q**: the target's / the draft's probability of a token. Sampling accepts a draft when a uniform
random number u is below p/q; on a refusal the correction is drawn from the **residual** norm(max(0, p − q)).
This is why the output follows the target's own distribution exactly (**lossless**). Greedy decoding
accepts a draft when it is the target's top token. **Lossy** methods (BiLD, lenience) trade some of that
for speed, and the page measures what they change.

**α (alpha)**: the chance a draft is accepted; **α̂** is this run's estimate (accepted ÷ tested drafts).
**c**: the time of a draft step as a fraction of a plain decoding step (the status's "c per verification"
is against one verification pass instead, when plain decoding has not run). **T(n)**: the time of one target forward
over n tokens; T(n)/T(1) ≈ 1 on a GPU, more on a CPU. **Tokens per target pass**: output tokens ÷ target
forwards. **Plain decoding (ar)**: one target forward per token, the baseline every speed-up is against.

**bf16 (bfloat16)**: 16-bit numbers with float32's range; the 4-bit copy computes with them, and the
Precision box runs the target in them. **4-bit copy**: the target's own weights stored in 4 bits (for the
default model, the very blocks it ships in), read 8 times fewer bytes a step than float32.

**Theorem 3.8** (Leviathan et al. 2023): expected speed-up (1 − α^(γ+1)) / ((1 − α)(γc + 1)), which
assumes a verification costs one step; the page also prices it with the T(γ+1)/T(1) measured here.

**i.i.d. acceptance**: the theorem's assumption that every draft position is accepted with the same α, so
position i with α^i. **Acceptance by position** a_i: the share of drafts whose position i was accepted (real
drafters fall faster than α^i). **Mean acceptance length**: tokens per target forward, 1 + a_1 + … + a_γ
(what serving engines such as vLLM report). **What if**'s speed-up at γ: that length over γ·c + T(γ+1)/T(1).

EESD's own measures (Appendix D of the EESD paper): **v_d**, accepted drafts ÷ drafted tokens (how often the
draft is right); **r_d**, accepted drafts ÷ output tokens (how much of the text the draft wrote); **HM**,
their harmonic mean; **T_d / T_t**, a draft step's time over a target step's (the α of EESD's eq. 14, this
page's c); **eq. 14**, EESD's predicted speed-up v_d / ((c − v_d)·r_d + v_d). **θ_M**: calibrated
Thompson sampling's predicted chance, from the draft's own hidden state, that its next token is accepted
(a small trained predictor); **θ̂** its running estimate from the run.
"""


def glossary_markdown() -> str:
    """The glossary: the common words, then each method's and each draft kind's, from the registry."""
    method_lines = "\n".join(f"- **{m.name}**: {m.glossary or m.summary}" for m in methods.discover().values())
    kind_lines = "\n".join(f"- **{k.form}**: {k.glossary}" for k in drafts.KINDS.values() if k.glossary)
    text = f"{GLOSSARY.strip()}\n\n**The methods** (the Method box):\n\n{method_lines}"
    return text + (f"\n\n**The drafts** (the Drafter box):\n\n{kind_lines}" if kind_lines else "")
