"""The browser app (Gradio): ``build_demo()`` builds the page, ``launch_options()`` its look.

``layout`` places the components and wires the events, ``handlers`` turns inputs into engine calls and
viz updates, ``views`` gives each registered method view a slot, ``baseline`` caches the autoregressive
baselines, ``session`` carries Stop requests to running decodes.
"""

from .layout import build_demo
from .theme import launch_options

__all__ = ["build_demo", "launch_options"]
