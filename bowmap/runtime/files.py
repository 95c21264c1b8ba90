"""File helpers that turn operating-system failures into one-line user errors."""

from __future__ import annotations

from typing import BinaryIO

from bowmap.runtime.errors import BowmapError


def open_for_reading(path: str, missing: str = "no such file", kind: str = "file") -> BinaryIO:
    """``open(path, "rb")``; a missing or unreadable file raises :class:`BowmapError` naming it
    (``missing`` says what a missing file means to the user, ``kind`` what was expected)."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise BowmapError(f"{path}: {missing}") from None
    except IsADirectoryError:
        raise BowmapError(f"{path}: is a directory, not a {kind}") from None
    except OSError as error:
        raise BowmapError(f"{path}: cannot read ({error.strerror})") from None


def read_bytes(path: str, missing: str = "no such file") -> bytes:
    """The whole file, with the errors of :func:`open_for_reading`."""
    with open_for_reading(path, missing) as handle:
        try:
            return handle.read()
        except OSError as error:
            raise BowmapError(f"{path}: cannot read ({error.strerror})") from None
