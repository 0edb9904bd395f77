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


# Not simulation inputs: the version, the machine description and the source bookkeeping itself.
_NOT_NUMBERS = ("schema_version", "machine", "sources", "provenance")


def number_paths(data: object, prefix: str = "") -> list[str]:
    """Dotted paths of every number in a profile's JSON (booleans excluded), e.g. ``generation.base_s``."""
    if isinstance(data, dict):
        return [
            p
            for key, value in data.items()
            if not (prefix == "" and key in _NOT_NUMBERS)
            for p in number_paths(value, f"{prefix}{key}.")
        ]
    if isinstance(data, list):
        return [p for i, value in enumerate(data) for p in number_paths(value, f"{prefix}{i}.")]
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return [prefix[:-1]]
    return []


def unsourced_numbers(data: dict) -> list[str]:
    """Every number of a sourced profile's JSON that lacks a traceable source, with the reason.

    A number needs a ``provenance`` entry whose ``source`` is a key of ``sources``, or ``unmeasured``
    with its path named in the profile's ``unmeasured`` list (where the derivation is spelled out).
    """
    provenance = data.get("provenance") or {}
    sources = data.get("sources") or {}
    unmeasured = " ".join(data.get("unmeasured") or [])
    problems = []
    for path in number_paths(data):
        entry = provenance.get(path)
        if entry is None:
            problems.append(f"{path}: no provenance entry")
        elif entry.get("source") == "unmeasured":
            if f"{path} " not in unmeasured + " ":
                problems.append(f"{path}: marked unmeasured but not listed in `unmeasured`")
        elif entry.get("source") not in sources:
            problems.append(f"{path}: source {entry.get('source')!r} is not one of `sources`")
    return problems


def provenance_summary(provenance: dict[str, NumberSource], sources: dict[str, Source]) -> dict[str, object] | None:
    """What of a sourced profile is published and what is assumed: counts, documents and the assumed
    numbers grouped by section (``trainer``: ``update_s_per_token, sync_fixed_s``). None: not sourced."""
    if not provenance:
        return None
    assumed = sorted(path for path, entry in provenance.items() if entry.source == "unmeasured")
    sourced = sorted(path for path, entry in provenance.items() if entry.source != "unmeasured")
    groups: dict[str, list[str]] = {}
    for path in assumed:
        head, _, rest = path.partition(".")
        groups.setdefault(head, []).append(rest)
    return {
        "sourced": sourced,
        "assumed": assumed,
        "documents": sorted({provenance[p].source for p in sourced}),
        "titles": {k: s.title for k, s in sources.items()},
        "assumed_by_section": groups,
    }


def provenance_line(summary: dict[str, object]) -> str:
    """One paragraph for people: N sourced from K documents; M assumed, by section."""
    sourced, assumed, docs = summary["sourced"], summary["assumed"], summary["documents"]
    groups = summary["assumed_by_section"]
    assert isinstance(sourced, list) and isinstance(assumed, list) and isinstance(docs, list)
    assert isinstance(groups, dict)
    parts = "; ".join(f"{head}: {', '.join(rest)}" for head, rest in groups.items())
    return (
        f"{len(sourced)} of {len(sourced) + len(assumed)} profile numbers are published figures "
        f"({', '.join(docs)}); {len(assumed)} are assumed (derivations in the profile's `unmeasured`): {parts}"
    )
