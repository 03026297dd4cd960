"""Shared fixtures: the real default model (loaded once per test session), tiny random models, the saved
traces of tests/data, and the served app in Chromium; and every test's lane markers.

Plain helpers shared by several test files are in helpers.py and conftest_ui.py (the page's), never in a
test file: no test file imports another (tests/test_layering.py checks it)."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # The suite runs on pytest-xdist workers (pytest.ini): each gets its share of the cores for torch's threads,
    # before torch is imported (one thread each on 2 cores). Workers of one thread each fill the time a browser
    # test leaves a core idle while the page draws (a one-token forward does not scale to 2 threads); workers of
    # two threads each spun against each other and were slower than one process (docs/testing.md).
    workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // workers)))

from conftest_ui import CHROMIUM, CHROMIUM_ARGS, DESKTOP, open_app, served_app  # noqa: E402
from helpers import load  # noqa: E402

import explorer  # noqa: E402
from explorer.api import load_cached  # noqa: E402


@pytest.fixture(autouse=True)
def a_new_visitor():
    """Every test is a new visitor of the app: one test's model loads never count against another's
    (every served app in this process is reached from 127.0.0.1, one visitor to ``api.loads_by``; the full
    suite loaded more than ``VISITOR_MODEL_LOADS`` tiny models and a late test was refused). The models stay
    cached; tests of the bound itself set their own counts."""
    from explorer import api

    api._LOADS.clear()
    yield


@pytest.fixture(scope="session")
def default_model():
    """SmolLM2-135M-Instruct in float32 on the CPU, shared by every test (read-only)."""
    return load_cached("default", "cpu", "float32")


@pytest.fixture(scope="session")
def shipped_exit4_agreement(default_model):
    """The shipped N = 4 exit's held-out agreement, from its manifest: the controllers' starting α."""
    from explorer.methods.eesd.exits import exit_for

    agreement = exit_for(default_model.model, 4).manifest["heldout_agreement"]
    assert 0.2 < agreement < 0.8, agreement
    return agreement


@pytest.fixture(scope="session")
def tiny_target():
    return explorer.load("tiny-random:1")


@pytest.fixture(scope="session")
def tiny_draft():
    """A draft that disagrees a lot with ``tiny_target`` (another seed, one layer)."""
    return explorer.load("tiny-random:2:1")


# -- saved traces (tests/data) ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ar():
    return load("ar")


@pytest.fixture(scope="module")
def lookup():
    return load("prompt_lookup")


# -- the served app in Chromium (the modules using these skip themselves when it is missing) -------------


@pytest.fixture(scope="module")
def url():
    with served_app() as (_, base):
        yield base


@pytest.fixture(scope="module")
def browser():
    """One Chromium per module; each test opens its own context (its own cookies and pages). Not one per session:
    Playwright's sync API keeps an event loop running on this thread while it lives, and the soak tests call
    ``asyncio.run`` (a launch costs ≈ 0.2 s here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def tab(browser):
    """One browser tab per module, which each test opens the app in afresh (``page``, ``conftest_ui.open_app``):
    navigating a tab that has loaded the page before took 0.7 s here, a new context's first load 2.7 s (Chromium
    keeps the tab's renderer, its compiled scripts and its cache), and ≈ 50 browser tests open the page. Each load
    is a new Gradio session, so no test sees another's state."""
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture
def page(tab, url):
    """The app, freshly opened at 1500 × 1000 in this module's tab."""
    return open_app(tab, url)


# -- lanes -----------------------------------------------------------------------------------------------
# Every test gets its markers here, from what it uses, so a new test needs no decorator to land in a lane:
# ``browser`` when its module drives Chromium or it asks for the Chromium fixtures above, ``model`` when it
# asks for the real default model, ``slow`` when it took over ~5 s for another reason on the developers'
# 2-core machine (`pytest --durations=0`, 2026-11-25, and the fast lane's own over ~5 s on 2026-11-28, a slower
# host: file::test, every parametrisation).
BROWSER_FIXTURES = {"browser", "tab", "page"}
MODEL_FIXTURES = {"default_model", "shipped_exit4_agreement"}
SLOW = {
    "test_trace_security.py::test_the_largest_trace_loads_and_draws_every_view_quickly",
    "test_soak.py::test_the_adversarial_soak_cancels_uploads_and_reads_the_worst_traces",
    "test_hierarchical.py::test_sampled_tokens_follow_the_target_with_three_models",
    "test_bench.py::test_bench_rows",
    "test_bild.py::test_sweep_trades_quality_for_cost_in_the_papers_direction",
    "test_lossless.py::test_sampled_tokens_follow_the_target_distribution",
    "test_compiled.py::test_without_a_compiler_decoding_runs_eagerly_and_says_why",
    "test_hierarchical.py::test_sampled_tokens_follow_the_target_through_its_4_bit_copy",
    "test_eagle_tree.py::test_sampled_eagle_tree_tokens_follow_the_target",
    "test_cli.py::test_profile_weighs_a_draft_step_against_its_bytes_at_the_measured_bandwidth",
    "test_cli.py::test_profile_prints_t_of_n_for_both_forwards_and_the_parts_and_no_impossible_ratio",
    "test_cancel.py::test_jobs_never_compute_more_at_once_than_the_slots",
    "test_app.py::test_python_app_py_serves_on_the_port_from_the_environment",
    "test_plotly_text.py::test_every_figure_shows_a_strangers_text_as_typed",
    "test_readme.py::test_python_app_py_serves_the_address_the_readme_names",
}


# Load a busy loop on purpose after a run timed on a quiet machine, and assert the page or the CLI says the pace
# moved: they run with the machine to themselves (``the_machine_to_itself``); the other worker's run would have
# slowed the "quiet" run as much as the loops slow the baseline, and the pace would seem to hold (it did, once).
QUIET = {
    "test_busy_machine.py::test_plain_decoding_on_a_busy_machine_gives_no_impossible_figure",
    "test_busy_machine.py::test_the_cli_says_when_the_machine_was_busy",
    "test_new_user_browser.py::test_a_busy_machine_prints_no_impossible_figure_on_the_page",
    "test_story_browser.py::test_on_a_busy_machine_the_comparison_prints_no_ratio_the_rule_refuses",
}


@pytest.fixture(autouse=True)
def the_machine_to_itself(request, tmp_path_factory):
    """On pytest-xdist workers, a ``QUIET`` test holds the machine alone: it takes an exclusive lock on a file the
    workers share, every other test a shared one, so it starts once the other workers' tests have ended, and their
    next tests wait for it (their module fixtures, a served app, an idle browser, stay up).

    Every test passes a turnstile (a second lock) on its way in, and a ``QUIET`` test holds it while it waits:
    without it, a shared lock is granted while an exclusive one waits, and with more than two workers the others held
    one between them for as long as they ran (a quiet test waited 125 s on four workers)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        yield
        return
    import fcntl

    name = f"{request.node.path.name}::{getattr(request.node, 'originalname', request.node.name)}"
    # the run's base temporary folder, the workers' own folders' parent: shared by them, removed by pytest later
    shared = tmp_path_factory.getbasetemp().parent
    with open(shared / "the-machine.lock", "a") as lock, open(shared / "the-turnstile.lock", "a") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        if name in QUIET:
            # its fixtures first, beside the other worker (a model's first load took 13.6 s with the machine held),
            # then the machine alone, the turnstile keeping newcomers out while the lock turns exclusive
            for fixture in request.fixturenames:
                if fixture not in ("request", "the_machine_to_itself"):
                    request.getfixturevalue(fixture)
            fcntl.flock(lock, fcntl.LOCK_UN)  # never held at the turnstile: two quiet tests would deadlock
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_EX)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# reaches a package registry for real (CI's machine has one; an offline laptop's fast lane skips it)
NETWORK = {"test_space_default.py::test_without_the_package_the_default_is_the_same_model_with_its_trained_drafts"}


def pytest_collection_modifyitems(items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if ("browser" in item.path.name or getattr(item.module, "sync_playwright", None) is not None
                or BROWSER_FIXTURES & fixtures):
            item.add_marker(pytest.mark.browser)
        if MODEL_FIXTURES & fixtures:
            item.add_marker(pytest.mark.model)
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        if name in SLOW:
            item.add_marker(pytest.mark.slow)
        if name in NETWORK:
            item.add_marker(pytest.mark.network)
