"""The browser app (Gradio): ``build_demo()`` builds the page, ``serving_demo()`` the page as it is served (with
its queue), ``launch_options()`` its look.

``layout`` places the components and wires the events, ``handlers`` turns inputs into engine calls and
viz updates, ``views`` gives each registered method view a slot, ``baseline`` caches the autoregressive
baselines, ``session`` carries Stop requests to running decodes.
"""

from .layout import build_demo, serving_demo
from .theme import launch_options

__all__ = ["build_demo", "launch_options", "serving_demo"]
