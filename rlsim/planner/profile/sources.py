"""Where a sourced profile's numbers come from: the public documents, and each number's derivation."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    """A public document a sourced profile's numbers come from: what it is, where, and which part."""

    title: str = Field(min_length=1)
    url: str = Field(min_length=1)
    version: str = Field(min_length=1, description="release, date or revision of the document")
    where: str = Field(min_length=1, description="table, figure or section the numbers are read from")


class NumberSource(_Strict):
    """Where one number of a sourced profile comes from: ``source`` is a key of ``Profile.sources``
    (or ``unmeasured``: then the profile's ``unmeasured`` list says how it was derived)."""

    source: str = Field(min_length=1)
    derivation: str = Field(min_length=1, description="the arithmetic from the published figure to this number")
