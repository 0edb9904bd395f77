"""A tiny name -> (factory, metadata) registry used by every plug-in role (scorers, batchers).

Each entry carries what other code needs to know about it (a runtime's needed packages and
precision, a batcher's sizing), so no second list of names exists anywhere: lists, defaults and
config validation all read the registry.

A registry names the modules that hold its built-in entries (``builtins``) and imports them on its first
lookup, the same way a user's plug-in modules are imported by name (``import_modules``): the module that
declares a role never imports the modules that implement it, so no import cycle runs through a registry.

Registration is idempotent (re-importing a module inside a Ray worker registers the same object
again and is fine); registering a *different* object under a taken name is a programming error.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from rlsim.errors import RlsimError

T = TypeVar("T")
M = TypeVar("M")


@dataclass(frozen=True)
class Entry(Generic[T, M]):
    name: str
    obj: T
    info: M

    @property
    def builtin(self) -> bool:
        """True for entries rlsim itself registers (not a user's plug-in module)."""
        return str(getattr(self.obj, "__module__", "")).startswith("rlsim.")


class Registry(Generic[T, M]):
    """``register(name, info)`` decorates a factory; ``info`` defaults to ``default_info()``."""

    def __init__(
        self,
        role: str,
        default_info: Callable[[], M] = lambda: None,  # type: ignore[assignment,return-value]
        builtins: Iterable[str] = (),
    ) -> None:
        self._role = role
        self._default_info = default_info
        self._items: dict[str, Entry[T, M]] = {}
        self._refused: dict[str, str] = {}  # names that would be expected here, and why this build has none
        self._builtins = tuple(builtins)  # modules registering rlsim's own entries, in listing order
        self._loaded = not self._builtins

    def load_builtins(self) -> None:
        """Import the built-in modules once (they register themselves); every lookup calls this first."""
        if self._loaded:
            return
        self._loaded = True  # set first: a built-in module that looks something up while loading must not recurse
        for module in self._builtins:
            importlib.import_module(module)  # part of rlsim: a missing one is a broken install and raises

    def register(self, name: str, info: M | None = None) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            existing = self._items.get(name)
            if existing is not None and existing.obj is not obj and not _same_definition(existing.obj, obj):
                raise ValueError(f"{self._role} {name!r} is already registered to {existing.obj!r}")
            self._items[name] = Entry(name, obj, info if info is not None else self._default_info())
            return obj

        return decorator

    def refuse(self, name: str, reason: str) -> None:
        """Record that ``name`` is deliberately not provided, and why: asking for it names the reason
        instead of answering "unknown"."""
        self._refused[name] = reason

    def refusal(self, name: str) -> str | None:
        """Why ``name`` is deliberately not provided (``refuse``), or None."""
        self.load_builtins()
        return self._refused.get(name)

    def unknown_message(self, name: str) -> str:
        """What to tell someone who asked for ``name``, which is not registered."""
        reason = self.refusal(name)
        if reason:
            return f"{self._role} {name!r} is not available: {reason}"
        return f"unknown {self._role} {name!r}; valid names: {self.valid_names()}"

    def entry(self, name: str) -> Entry[T, M]:
        self.load_builtins()
        try:
            return self._items[name]
        except KeyError:
            raise RlsimError(self.unknown_message(name)) from None

    def get(self, name: str) -> T:
        return self.entry(name).obj

    def info(self, name: str) -> M:
        return self.entry(name).info

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self.load_builtins()
        return sorted(self._items)

    def entries(self) -> list[Entry[T, M]]:
        """Every entry in registration order (rlsim's own in the order its modules register them)."""
        self.load_builtins()
        return list(self._items.values())

    def valid_names(self) -> str:
        self.load_builtins()
        return ", ".join(self.names()) or "(none registered)"

    def __contains__(self, name: object) -> bool:
        self.load_builtins()
        return name in self._items


def _same_definition(a: Any, b: Any) -> bool:
    # A module imported again (in a worker, or under a second name) defines an equal class anew.
    return getattr(a, "__qualname__", None) == getattr(b, "__qualname__", object())


def import_modules(modules: Iterable[str], source: str) -> None:
    """Import user modules (which may register plug-in runtimes); ``source`` names the setting in errors."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise RlsimError(
                f"{source} names {name!r}, which cannot be imported ({err}); check the module name and PYTHONPATH"
            ) from None


def missing_modules(modules: Iterable[str]) -> list[str]:
    """The modules in ``modules`` that cannot be found, checked without importing them (fast)."""
    return [m for m in modules if not _findable(m)]


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
