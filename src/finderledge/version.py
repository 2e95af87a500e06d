"""The installed version, for ``--version``, the server's OpenAPI document and ``/api/v1/version``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["package_version"]


def package_version() -> str:
    """The installed distribution's version (else the package's ``__version__``)."""
    try:
        return version("finderledge")
    except PackageNotFoundError:
        from . import __version__

        return __version__
