"""Build configuration that pyproject.toml cannot state: the top-level ``runspecs/`` ships inside the package.

The catalogue stays at the top of the repository (the project layout), and the
wheel carries it as ``evalkit/runspecs/`` (a data package mapped from that
folder), where :mod:`evalkit.catalog` looks first. Everything else is in
pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["evalkit", "evalkit.*"]), "evalkit.runspecs"],
    package_dir={"evalkit.runspecs": "runspecs"},
    package_data={"evalkit.runspecs": ["*/*.json", "_data/*"]},
)
