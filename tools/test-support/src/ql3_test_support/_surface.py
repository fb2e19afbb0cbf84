"""The public-surface and installed-wheel checks every QL3 package runs on itself.

Each wheel pins its surface (`__all__` sorted, complete, errors shown at the package) and proves
its tests import the installed wheel, not the checkout. Written once per package, the checks
drifted: one sorted `__all__` plainly and another like ruff's RUF022, one counted imported
submodules as public names, one never looked at the errors. Here they are written once; a
package's test calls them with its own module. Each check raises `AssertionError` with a message
that names what is wrong, so pytest shows it like a failed `assert` (not an `assert` statement:
this is library code, and `python -O` would drop those).
"""

from __future__ import annotations
import __future__

import types
from importlib.resources import files
from pathlib import Path

__all__ = [
    "all_sort_key",
    "check_all_complete",
    "check_all_sorted",
    "check_installed",
    "check_public_errors",
    "check_ships",
    "public_names",
]


def all_sort_key(name: str) -> tuple[int, str]:
    """Sort like ruff RUF022 (isort style): CONSTANTS, then Classes, then everything else."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def _fail(message: str) -> None:
    raise AssertionError(message)


def check_all_sorted(module: types.ModuleType) -> None:
    """Require `module.__all__` in RUF022 order without duplicates."""
    names = list(module.__all__)
    expected = sorted(set(names), key=all_sort_key)
    if names != expected:
        _fail(f"{module.__name__}.__all__ is not sorted (RUF022) or repeats a name: {names}")


def public_names(module: types.ModuleType) -> set[str]:
    """Return the names a user can import from `module`: no `_private`, no submodules.

    `__version__` counts as public; `from __future__ import annotations` does not.
    """
    return {
        name
        for name, value in vars(module).items()
        if (not name.startswith("_") or name == "__version__")
        and not isinstance(value, types.ModuleType)
        and value is not __future__.annotations
    }


def check_all_complete(module: types.ModuleType) -> None:
    """Require `__all__` to list exactly the public names of `module`, and `__version__`."""
    listed, public = set(module.__all__), public_names(module)
    missing, extra = sorted(public - listed), sorted(listed - public)
    if missing or extra:
        _fail(
            f"{module.__name__}.__all__ differs from its public names:"
            f" public but not listed {missing}, listed but not public {extra}"
        )
    if "__version__" not in listed:
        _fail(f"{module.__name__}.__all__ lacks __version__")


def check_public_errors(module: types.ModuleType, base: type[BaseException]) -> None:
    """Require every exported exception to subclass `base` and name `module` as its home.

    Tracebacks then show the supported import path (`ql3_runtime_core.QL3Error`), and callers
    catch one family. A package that exports no exception passes.
    """
    errors = [
        value
        for name in module.__all__
        if isinstance(value := getattr(module, name), type) and issubclass(value, BaseException)
    ]
    foreign = sorted(error.__name__ for error in errors if not issubclass(error, base))
    if foreign:
        _fail(f"{module.__name__} exports errors outside {base.__name__}: {foreign}")
    elsewhere = sorted(
        f"{error.__name__} ({error.__module__})"
        for error in errors
        if error.__module__ != module.__name__
    )
    if elsewhere:
        _fail(f"{module.__name__} errors must set __module__ = {module.__name__!r}: {elsewhere}")


def check_installed(module: types.ModuleType) -> None:
    """Require `module` to come from an installed wheel (site-packages), not a source checkout.

    An editable install or a `src/` folder on the path would let a test pass with files the
    wheel does not ship (tests run against the installed wheel, DESIGN §14); the nox sessions
    install only built wheels.
    """
    location = Path(module.__file__ or "").resolve()
    if "site-packages" not in location.parts:
        _fail(f"{module.__name__} is imported from {location}, not from site-packages")
    # A virtualenv inside the checkout is fine; the workspace's packages/ above it is not.
    above = location.parts[: location.parts.index("site-packages")]
    if "packages" in above:
        _fail(f"{module.__name__} is imported from a source tree: {location}")


def check_ships(module: types.ModuleType, *resources: str) -> None:
    """Require the installed package to carry `py.typed` and each resource path given."""
    root = files(module.__name__)
    missing = [path for path in ("py.typed", *resources) if not root.joinpath(path).is_file()]
    if missing:
        _fail(f"the installed {module.__name__} lacks {missing}")
