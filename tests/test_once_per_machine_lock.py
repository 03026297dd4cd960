"""Two processes that start on an empty cache at once (two pytest workers, two app workers) make what is kept once
per machine once (the default model's conversion, the kernel choices, the compiled layer, the VNNI kernel): the
second waits on a lock beside it and then finds the first one's (``machine.one_process_at_a_time``). ``flock``
locks belong to an open file, so two threads that each open the lock file exclude each other exactly as two
processes do."""

import threading
import time

import pytest
import torch

from explorer import machine
from explorer.engine import fast, kernels


def test_a_second_loader_waits_for_the_first_ones_conversion(tmp_path):
    folder = tmp_path / "converted"
    inside, done, said = threading.Event(), threading.Event(), []

    def first():
        with machine.one_process_at_a_time(folder):
            said.append("first converts")
            inside.set()
            done.wait(10)
            said.append("first done")

    def second():
        inside.wait(10)
        with machine.one_process_at_a_time(folder):
            said.append("second goes on")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    assert said == ["first converts"]  # the second waits while the first holds the lock
    done.set()
    for thread in threads:
        thread.join(10)
    assert said == ["first converts", "first done", "second goes on"]


def test_a_second_process_waits_for_the_first_ones_kernel_choice(tmp_path, monkeypatch):
    """The matrix-kernel choice is timed by one process at a time (``engine.fast``): a process that finds another
    one choosing waits, so neither times the kernels on a machine the other keeps busy."""
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path))
    monkeypatch.delenv("EXPLORER_KERNELS", raising=False)
    if len(kernels.available(torch.float32)) == 1:
        pytest.skip("nothing is measured here: one kernel is the only one")
    module = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64))
    weights = [m.weight for m in module]
    built = []
    chooser = threading.Thread(target=lambda: built.append(fast._build(module, None)))
    with machine.one_process_at_a_time(kernels.cache_path(fast._signature(weights), torch.float32)):
        chooser.start()
        time.sleep(0.5)
        assert built == [] and chooser.is_alive()  # waiting for the lock the other process holds
    chooser.join(60)
    assert built and built[0][2] is not None  # then it chose, and kept its choice
    assert built[0][2].how == "measured"
    assert kernels.read_cached(fast._signature(weights), torch.float32).kinds == built[0][2].kinds
