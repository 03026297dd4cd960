"""BiTA's views from a saved trace (no model): the tree with its accepted path, the grouped attention mask
with hover links, Figure 6's partial mask for large trees, and the per-round figure."""

import re
from pathlib import Path

import explorer
from explorer.methods.bita.tree import BitaConfig, build_tree, tree_record
from explorer.viz.views import note_for, tree, views_for

DATA = Path(__file__).parent / "data"
TRACE = explorer.load_trace((DATA / "trace_bita.json").read_text())


def test_views_apply_to_bita_traces_only_and_the_note_says_lossless():
    assert {"bita-tree", "bita-rounds"} <= {v.name for v in views_for(TRACE)}
    ar = explorer.load_trace((DATA / "trace_ar.json").read_text())
    assert not {"bita-tree", "bita-rounds"} & {v.name for v in views_for(ar)}
    note = note_for("bita")
    assert note is not None and not TRACE.settings.lossy and "lossless" in note.text


def test_every_round_draws_its_tree_and_its_mask():
    for r in TRACE.rounds:
        page = tree.tree_html(TRACE, r.index)
        t = r.tree
        assert len(re.findall(r"<g class='bn bn-(?:acc|cand)", page)) == len(t["nodes"])
        assert len(re.findall(r"<g class='bn bn-acc", page)) == len(t["accepted_path"])
        assert page.count("bn-tgt") == (1 if len(r.emitted) > len(t["accepted_path"]) else 0) + 1  # + its CSS rule
        rows = re.findall(r"<tr class='hr-(\d+)", page)
        assert [int(x) for x in rows] == list(range(len(t["positions"])))  # small trees: the whole mask
        assert page.count("class='col h-p'") == t["prompt_tokens"]
        for group in ("context", "mask tokens"):
            assert f">{group}</th>" in page
        if t["nodes"]:
            assert ">candidates</th>" in page


def test_mask_cells_follow_the_trace_and_prompt_columns_only_for_masks():
    r = next(r for r in TRACE.rounds if r.tree["nodes"])
    page = tree.tree_html(TRACE, r.index)
    t = r.tree
    n_prompt = t["prompt_tokens"]
    for i, row in enumerate(t["attention"]):
        cells = re.search(rf"<tr class='hr-{i}[^']*'>(.*?)</tr>", page).group(1)
        states = re.findall(r"<td class='(on|off)", cells)
        prompt, rest = states[:n_prompt], states[n_prompt:]
        assert set(prompt) <= ({"on"} if t["sees_prompt"][i] else {"off"})
        tree_cells = rest[len(rest) - len(row):]
        assert "".join("1" if s == "on" else "0" for s in tree_cells) == row


def test_hovering_a_node_is_linked_to_its_row_by_css():
    r = next(r for r in TRACE.rounds if r.tree["nodes"])
    page = tree.tree_html(TRACE, r.index)
    for i, p in enumerate(r.tree["positions"]):
        if p["kind"] == "node":
            assert f".bita-view:has(.tn-{i}:hover) .hr-{i}" in page
            assert f"tn-{i}'" in page  # the node's box carries the link class


def test_large_trees_show_figure_6s_partial_mask():
    layout = build_tree(BitaConfig("full", 3, 4), [[(100 + 10 * d + r, 0.2) for r in range(4)] for d in range(1, 4)], 5)

    class Known:  # tree_record reads the target's rows only where they were computed
        def known(self):
            return set()

    record = tree_record(layout, [0, 4], Known(), 16, 1, 4, BitaConfig("full", 3, 4))
    shown = tree._shown_positions(record)
    assert len(record["positions"]) > tree.MAX_MASK_POSITIONS > len(shown)
    kinds = [record["positions"][i] for i in shown]
    assert {p["node"] for p in kinds if p["kind"] == "mask"} == {-1, 0, 4}  # groups of the context and the path
    nodes = {p["node"] for p in kinds if p["kind"] == "node"}
    assert {0, 4} <= nodes and all(record["nodes"][n]["parent"] in (-1, 0, 4) for n in nodes)


def test_a_mask_larger_than_its_box_says_it_scrolls():
    for r in TRACE.rounds:
        shown = tree.tree_html(TRACE, r.index)
        rows = shown.split("</thead>")[-1].count("<tr")
        hint = re.search(r"bita-scroll-hint'>(\d+) rows", shown)
        assert (hint is not None) == (rows > tree.SCROLL_HINT_ROWS)
        if hint:
            assert int(hint.group(1)) == rows


def test_rounds_figure_counts_nodes_and_accepted_drafts():
    fig = tree.rounds_figure(TRACE, 1)
    assert list(fig.data[0].y) == [len(r.tree["nodes"]) for r in TRACE.rounds]
    assert list(fig.data[1].y) == [len(r.tree["accepted_path"]) for r in TRACE.rounds]
    assert fig.layout.title.text.startswith("BiTA")
