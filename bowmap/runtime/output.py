"""Output files: written under a hidden temporary name and renamed only on success (nothing looking
complete is left after a failure); standard output and paths that are no regular file (a
device, a pipe) written straight.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile

from bowmap.runtime.errors import BowmapError

# ----------------------------------------------------------------------------------- writer


class SamWriter:
    """The one owner of the output (used by one thread): SAM to stdout (``path`` None or '-'),
    SAM to a file, or BAM when ``path`` ends in ``.bam``.

    A file is written under a temporary name in its folder and renamed to ``path`` only by
    ``close(success=True)``; ``close(success=False)`` removes it, so no partial output is ever
    left looking complete. An existing ``path`` that is no regular file (``/dev/null``, a named
    pipe, ``/dev/stdout``) is written straight: renaming onto it would replace the device or
    pipe with a file (as root, even ``/dev/null``). BAM goes through pysam (the bundled
    samtools): the SAM text is kept in a temporary file and converted at close, which needs
    room for the SAM text meanwhile.
    """

    def __init__(self, path: str | None, header: str):
        self.path = None if path in (None, "-") else path
        self._temporaries: list[str] = []
        self._closed = False
        if self.path is None:
            self._stream = sys.stdout.buffer
            self._owns_stream = False
        else:
            self._bam = self.path.endswith(".bam")
            self._straight = os.path.exists(self.path) and not os.path.isfile(self.path) and not os.path.isdir(self.path)
            if self._straight and not self._bam:
                try:
                    self._stream = open(self.path, "wb", buffering=1 << 20)
                except OSError as error:
                    raise BowmapError(f"{self.path}: cannot create output ({error.strerror})") from None
            else:
                self._stream = open(self._temporary_path(".sam.tmp" if self._bam else ".tmp"), "wb", buffering=1 << 20, closefd=True)
            self._owns_stream = True
        self.write(header.encode())

    def _temporary_path(self, suffix: str) -> str:
        folder, name = os.path.split(os.path.abspath(self.path))
        if self._straight:  # no temporaries beside a device or a pipe
            folder = tempfile.gettempdir()
        temporary = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}{suffix}")
        try:
            # O_EXCL: never reuse someone else's file; mode 0o666 lets the umask decide as for any output.
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as error:
            raise BowmapError(f"{self.path}: cannot create output ({error.strerror})") from None
        os.close(descriptor)
        self._temporaries.append(temporary)
        return temporary

    def write(self, data: bytes) -> None:
        try:
            self._stream.write(data)
        except BrokenPipeError:
            raise
        except OSError as error:
            self.close(success=False)
            raise BowmapError(f"{self.path or 'stdout'}: cannot write output ({error.strerror})") from None

    def close(self, success: bool) -> None:
        """Finish the output: flush and rename into place (``success``), or remove it."""
        if self._closed:
            return
        self._closed = True
        if not self._owns_stream:
            if success:
                self._stream.flush()
            return
        try:
            self._stream.close()
            if success and self._bam:
                self._convert_to_bam()
            if success and not self._straight:
                os.replace(self._temporaries[-1], self.path)
                self._temporaries.pop()
        except OSError as error:
            raise BowmapError(f"{self.path}: cannot write output ({error.strerror})") from None
        finally:
            for temporary in self._temporaries:
                try:
                    os.remove(temporary)
                except OSError:
                    pass
            self._temporaries.clear()

    def _convert_to_bam(self) -> None:
        import pysam

        sam_path = self._temporaries[-1]
        bam_path = self.path if self._straight else self._temporary_path(".bam.tmp")
        try:
            pysam.view("-b", "-o", bam_path, sam_path, catch_stdout=False)
        except pysam.SamtoolsError as error:
            message = " ".join(str(error).split())
            raise BowmapError(f"{self.path}: BAM conversion failed ({message[:200]})") from None

    def __enter__(self) -> SamWriter:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(success=kind is None)
