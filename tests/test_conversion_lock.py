"""Two processes that start on an empty cache at once (two pytest workers, two app workers) convert the default
model once: the second waits on a lock beside the folder and then finds the first one's conversion
(``models.default._one_process_at_a_time``). ``flock`` locks belong to an open file, so two threads that each open
the lock file exclude each other exactly as two processes do."""

import threading
import time

from explorer.models import default


def test_a_second_loader_waits_for_the_first_ones_conversion(tmp_path):
    folder = tmp_path / "converted"
    inside, done, said = threading.Event(), threading.Event(), []

    def first():
        with default._one_process_at_a_time(folder):
            said.append("first converts")
            inside.set()
            done.wait(10)
            said.append("first done")

    def second():
        inside.wait(10)
        with default._one_process_at_a_time(folder):
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
