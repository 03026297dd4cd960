"""Two processes that start on an empty cache at once (two pytest workers, two app workers) make what is kept once
per machine once (the default model's conversion, the kernel choices, the compiled layer, the VNNI kernel): the
second waits on a lock beside it and then finds the first one's (``machine.one_process_at_a_time``). ``flock`` locks belong to an open file, so two threads that each open
the lock file exclude each other exactly as two processes do."""

import threading
import time

from explorer import machine


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
