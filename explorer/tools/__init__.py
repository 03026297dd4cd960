"""Operator tools: load and abuse tests run from the command line (``python -m explorer soak``), never imported by
the app or the decoding code.

``soak`` serves the app (``explorer.ui.serving_demo()``) on loopback in its own process and drives its ``/decode``
API with concurrent clients; ``soak_adversarial`` (``soak --adversarial``) cancels long decodes, uploads files
at the size cap and reads the worst legal traces.
"""
