"""File helpers that turn operating-system failures into one-line user errors."""

from __future__ import annotations

from bowmap.errors import BowmapError


def read_bytes(path: str, missing: str = "no such file") -> bytes:
    """The whole file; a missing or unreadable file raises :class:`BowmapError` naming it
    (``missing`` says what a missing file means to the user)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise BowmapError(f"{path}: {missing}") from None
    except IsADirectoryError:
        raise BowmapError(f"{path}: is a directory, not a file") from None
    except OSError as error:
        raise BowmapError(f"{path}: cannot read ({error.strerror})") from None
