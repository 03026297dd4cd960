"""The suite's own set-up (pytest.ini, tests/conftest.py): it runs on pytest-xdist workers (two on 2 cores),
each with its share of the cores for torch. Two workers of two threads on 2 cores spun against each other and ran
slower than one process (docs/testing.md), so a torch imported before conftest sets the share would quietly double
the suite."""

import os

import pytest
import torch


def test_each_worker_gives_torch_its_share_of_the_cores():
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None:
        pytest.skip("run in one process (-n 0): torch keeps every core")
    # conftest's share (cores ÷ workers), or the OMP_NUM_THREADS the caller set, which conftest keeps
    share = max(1, len(os.sched_getaffinity(0)) // int(workers))
    assert torch.get_num_threads() == int(os.environ.get("OMP_NUM_THREADS", share))
