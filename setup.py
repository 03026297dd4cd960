"""What pyproject.toml cannot say: the repository's assets/ (prompts, trained drafts, the target's own answers,
the shipped benchmarks) goes into the installed package as explorer/assets/, where explorer/shipped.py finds it, so
an installed copy runs from any folder while a checkout keeps one assets/ at its root. Packages are found as
namespaces too: explorer/engine has no __init__.py."""

from setuptools import find_namespace_packages, setup

setup(packages=find_namespace_packages(include=["explorer", "explorer.*"], exclude=["*.__pycache__"])
      + ["explorer.assets"], package_dir={"explorer.assets": "assets"})
