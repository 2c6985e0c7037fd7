"""``cache:``: the response store, so repeated and resumed requests cost nothing."""

from __future__ import annotations

from pydantic import Field

from evalkit.config.base import Strict


class CacheSettings(Strict):
    """The response store: successful answers kept in SQLite so repeats and resumed runs cost no request."""

    enabled: bool = Field(
        True,
        description="Answer repeated requests from the response store and keep new answers in it (default true); "
        "--no-cache turns it off for one run.",
    )
    path: str | None = Field(
        None,
        description="The SQLite file of the store, relative to the config file's folder; absent: "
        "<output_dir>/responses.sqlite.",
    )
