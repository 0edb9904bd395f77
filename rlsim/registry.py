"""A tiny name -> factory registry used by every plug-in role (scorers, batchers, generators).

Registration is idempotent (re-importing a module inside a Ray worker registers the same object
again and is fine); registering a *different* object under a taken name is a programming error.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from rlsim.errors import RlsimError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, role: str) -> None:
        self._role = role
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            existing = self._items.get(name)
            same = existing is not None and getattr(existing, "__qualname__", None) == getattr(
                obj, "__qualname__", object()
            )
            if existing is not None and existing is not obj and not same:
                raise ValueError(f"{self._role} {name!r} is already registered to {existing!r}")
            self._items[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(sorted(self._items)) or "(none registered)"
            raise RlsimError(f"unknown {self._role} {name!r}; valid names: {valid}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
