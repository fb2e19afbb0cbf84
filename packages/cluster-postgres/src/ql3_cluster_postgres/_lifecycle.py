"""`with` support shared by the package's resource holders, written once.

The admin, repository and ingress hold connections that `close()` frees; the private server
holds a process that `start()` begins and `stop()` ends. Each
only says how it closes or starts and stops; these bases turn that into a context manager.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["Closing", "Started"]


class Closing(ABC):
    """`with obj:` gives `obj` back and calls `close()` on the way out, even after an error."""

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds; it may reopen on next use."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Started(ABC):
    """`with obj:` calls `start()` and gives its result; `stop()` runs on the way out."""

    @abstractmethod
    def start(self) -> Self:
        """Begin running and return the object itself."""

    @abstractmethod
    def stop(self) -> None:
        """Stop running; idempotent."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
