"""Per-session method state through the registry (``Method.session_state``): the page and the ZeroGPU workers hand a
session's memory over as plain data and take it back without naming a method."""

from __future__ import annotations

import pickle

from explorer import methods


def test_a_sessions_memory_crosses_a_process_boundary_by_method_name():
    keeping = [name for name, m in methods.discover().items() if m.session_state is not None]
    assert keeping == ["suffix"]  # the one method that learns from a session's earlier runs, found by its record
    session, other = f"{methods.API_SESSION_PREFIX}registry-test", "registry-test-other"
    methods.replace_sessions(session, {"suffix": [("fp", [1, 2, 3]), ("fp", [4, 5])]})
    methods.replace_sessions(other, {"suffix": [("fp", [9])]})
    exported = pickle.loads(pickle.dumps(methods.export_sessions(session)))  # what a worker gets, as it gets it
    assert exported == {"suffix": [("fp", [1, 2, 3]), ("fp", [4, 5])]}
    methods.replace_sessions(session, exported | {"no-such-method": [("fp", [7])]})  # a name it lacks: ignored
    assert methods.export_sessions(session) == exported
    methods.replace_sessions(session, {"suffix": []})  # handed back empty: the session's memory is empty
    assert methods.export_sessions(session) == {"suffix": []}
    assert methods.export_sessions(other) == {"suffix": [("fp", [9])]}  # another session's is its own
    methods.replace_sessions(other, {"suffix": []})
