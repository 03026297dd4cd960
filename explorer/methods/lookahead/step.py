"""One lookahead-decoding round (Fu et al., ICML 2024, arXiv 2402.02057, Algorithm 1 and Figure 2), on the
round driver:

    1. draft   — the pool's n-grams that begin with the last decided token, merged into a token tree (the
                 verification branch; no model runs)
    2. forward — one target forward over [pending token | verification tree | the Jacobi window] with the
                 paper's attention mask (``engine.tree.SideRows``: the window and the tree never see each other)
    3. accept  — walk down the tree while the target's own token is a child (greedy: the longest matching
                 guess; sampling: a draw from the target at every node, exact in distribution)
    4. update  — the window's top level's outputs become its next level and the columns they complete join the
                 pool as n-grams (``window``); the accepted nodes' keys and values move into place

Shape legend: E window rows, V vocabulary.
"""

from __future__ import annotations

from ...engine.cache import new_cache
from ...engine.forward import lm_head
from ...engine.rounds import Round
from ...engine.sampling import SamplingConfig
from ...engine.tree import SideRows, TokenTree, accept_tree, tree_round_record, verify_tree
from ...trace import Timing
from .window import Pool, Window, trie


class LookaheadStep:
    """The round step: keeps the Jacobi window and the n-gram pool across rounds."""

    def __init__(self, target, options, sampling: SamplingConfig, rng, prompt_ids: list[int], seed: int):
        self.model, self.head = target.model, lm_head(target.model)
        self.options, self.sampling = options, sampling
        self.generator = rng.on(target.device)
        self.window = Window(options.window, options.ngram, prompt_ids, seed)
        self.pool = Pool(options.guesses)
        if options.pool == "prompt":  # the reference implementation's POOL_FROM_PROMPT
            self.pool.add_text(prompt_ids, options.ngram)
        self.cache = new_cache()
        self.cached = 0  # context tokens whose keys and values are in the cache

    def __call__(self, round: Round):
        clock, context = round.clock, round.context
        # 1. draft: the pool's guesses after the last decided token, as one tree (room for the target's own token)
        offered = self.pool.candidates(context[-1])  # at most G: the pool keeps G per first token
        guesses = [gram for gram, _ in offered]
        tokens, parents, share, ends = trie(guesses, round.budget - 1)
        tree = TokenTree.build(tokens, parents, share)
        levels = [list(level) for level in self.window.levels]  # as this round feeds them (for the trace)
        window_tokens, offsets, visible = self.window.rows()
        side = SideRows(tuple(window_tokens), tuple(offsets), visible, read=self.window.width)  # the top level read
        drafted_at = clock()
        # 2. one forward: verification branch and lookahead branch
        verified = verify_tree(self.model, self.head, self.cache, self.cached, context, tree, self.sampling, side)
        verified_at = clock()
        # 3. accept
        context_len = accept_tree(verified, tree, self.cache, round, self.sampling, self.generator)
        self.cached = context_len + len(verified.path)
        # 4. update: the top level's guesses (argmax: the window only guesses, whatever the sampling)
        top = verified.side_logits.argmax(dim=-1).tolist()
        grams = self.window.step(top)
        added = self.pool.add(grams)
        timing = Timing(drafted_at - round.start, verified_at - drafted_at, clock() - verified_at)
        pool_size = len(self.pool)

        def record():  # off the timed path
            on_path = set(verified.path)  # how far the target followed each guess
            detail = {"levels": levels, "outputs": top, "collected": len(grams), "new_grams": added, "pool": pool_size,
                      "guesses": [list(g) for g in guesses], "sources": [source for _, source in offered],
                      "followed": [sum(node in on_path for node in tree.path_to(end)) for end in ends],
                      "input_positions": verified.n_tail + tree.n_nodes + side.n_rows}
            return tree_round_record(round.index, context_len, tree, share, verified, timing, kind="lookahead",
                                     top_k=0, detail=detail, draft_forwards=0)
        return record
