"""The soak's clients: each a ``gradio_client.Client`` of its own (its own session) that submits its share of the
decodes one after the other, cancels the ones it is told to, and checks every result against its reference
(identical token for token, or a cancelled run's prefix)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import time

from ..engine.controllers import DEFAULT_GAMMA
from ..limits import clip

GAMMA = DEFAULT_GAMMA  # every request's γ
CANCEL_AFTER_S = 0.3  # a cancelled job is cancelled this long after it was submitted
JOB_TIMEOUT_S = 900.0  # one request's bound, queueing included


def page_client(url: str, **options):
    """A ``gradio_client.Client`` of the page at ``url`` (a session of its own). Certificates are checked where
    there are any: a plain ``http://`` address has none, and checking costs the client a CA bundle loaded for every
    request it sends (35 ms here; 19 s of CPU over one run of the test suite, whose clients talk to ``127.0.0.1``)."""
    from gradio_client import Client

    return Client(url, verbose=False, ssl_verify=not url.startswith("http://"), **options)


def client_loop(url: str, client_no: int, clients: int, runs: int, assignment: list, references: dict,
                 max_new_tokens: int, seed: int, model: str, cancel_every: int, jobs: list, lock, t0: float):
    try:
        client = page_client(url, download_files=False)
    except Exception as err:  # noqa: BLE001  (the server did not answer: every job of this client failed)
        with lock:
            jobs.extend({"job": run * clients + client_no, "client": client_no, "method": None, "prompt": None,
                         "cancel_requested": False, "outcome": "error", "identical": None, "latency_s": None,
                         "error": f"client could not connect: {type(err).__name__}: {_first_line(err)}"}
                        for run in range(runs))
        return
    try:
        for run in range(runs):
            n = run * clients + client_no  # the submission's number, interleaved across clients
            request = assignment[n]
            cancel = cancel_every > 0 and (n + 1) % cancel_every == 0
            record = {"job": n, "client": client_no, "method": request.label, "prompt": request.prompt_no,
                      "cancel_requested": cancel, "outcome": None, "error": None, "identical": None,
                      "new_tokens": None, "stop_reason": None, "latency_s": None}
            submitted = time.perf_counter()
            record["submitted_s"] = round(submitted - t0, 3)
            try:
                job = client.submit(request.prompt, request.method, request.draft or "", GAMMA, 0.0,
                                    max_new_tokens, seed, model, api_name="/decode")
            except Exception as err:  # noqa: BLE001
                outcome, out, message = "error", None, f"submit failed: {type(err).__name__}: {_first_line(err)}"
            else:
                outcome, out, message = _wait(job, cancel, record)
            if outcome == "result":
                _check(record, out, references[request])
            else:
                record["outcome"] = outcome
                record["error" if outcome == "error" else "cancel_note"] = message
            record["latency_s"] = round(time.perf_counter() - submitted, 3)
            with lock:
                jobs.append(record)
    finally:
        client.close()


def _wait(job, cancel: bool, record: dict) -> tuple[str, object, str | None]:
    """Wait for a job (cancelling it first if asked, noting in ``record`` whether it was queued or running
    then): ("result", output, None), ("cancelled", None, what the client said) or ("error", None, message)."""
    from gradio_client.exceptions import AppError

    try:
        if cancel:
            try:
                return "result", job.result(timeout=CANCEL_AFTER_S), None
            except concurrent.futures.TimeoutError:
                with contextlib.suppress(Exception):
                    record["cancelled_while"] = str(job.status().code.value)  # e.g. IN_QUEUE, PROCESSING
                job.cancel()
        out = job.result(timeout=JOB_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        return "error", None, f"no result within {JOB_TIMEOUT_S:.0f} s"
    except concurrent.futures.CancelledError:
        return "cancelled", None, "CancelledError"
    except AppError as err:  # the server's gr.Error: its message
        return ("cancelled" if cancel else "error"), None, _first_line(err) or type(err).__name__
    except Exception as err:  # noqa: BLE001  (count it and go on; the server gone shows as many of these)
        # gradio_client 2.7 reports a job cancelled while it ran as a KeyError about a response without
        # 'data': on a job we cancelled, any failure is the cancel as the client saw it
        return ("cancelled" if cancel else "error"), None, f"{type(err).__name__}: {_first_line(err)}"
    if out is None and cancel:
        return "cancelled", None, "no output"
    return "result", out, None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else ""


def _check(record: dict, out, reference: list[int]) -> None:
    """A result against its reference: finished and identical, or a cancelled run's prefix, or wrong."""
    try:
        data = json.loads(out)
        ids = [int(i) for i in data["output_ids"]]
        stop = data.get("summary", {}).get("stop_reason")
    except (TypeError, ValueError, KeyError):
        record["outcome"], record["error"] = "error", f"not a trace: {clip(out, 60)}"
        return
    record["new_tokens"], record["stop_reason"] = len(ids), stop
    if ids == reference:
        record["outcome"], record["identical"] = "finished", True
    elif record["cancel_requested"] and ids == reference[: len(ids)]:  # stopped early by the cancel
        record["outcome"], record["identical"] = "cancelled", None
        record["partial"] = True
    else:
        record["outcome"], record["identical"] = "finished", False
        record["first_difference"] = next((i for i, (a, b) in enumerate(zip(ids, reference)) if a != b),
                                          min(len(ids), len(reference)))
