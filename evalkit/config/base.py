"""The base of every config model: unknown keys refused, so a typo is an error naming the key, never ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    #: allow_inf_nan=False: .inf or .nan is never a meant timeout, rate or temperature
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)
