"""Output files, one helper for every command.

:class:`OutputFile` writes standard output (``-`` or no path), a regular file under a hidden
temporary name in its folder renamed onto the path only on success (nothing looking complete
is left after a failure), or straight into an existing path that is no regular file (a device,
a named pipe, ``/dev/stdout``): a temporary renamed onto ``/dev/null`` would replace the device
(as root). Files are made with mode 0666 less the umask, as any tool's. Every failure is a
one-line :class:`BowmapError` naming the output and the system's cause ("No space left on
device"). :func:`refuse_inputs` stops an output from overwriting an input. :class:`SamWriter`
writes SAM, or BAM through a samtools process (see there).
"""

from __future__ import annotations

import os
import secrets
import sys

from bowmap.runtime.errors import BowmapError, UsageError

# ------------------------------------------------------------------------------------- files


def _cause(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def _writes_straight(path: str) -> bool:
    """An existing path that is no regular file (or one under /dev or /proc, such as
    /dev/stdout redirected to a file) is written in place, never replaced."""
    if not os.path.exists(path) or os.path.isdir(path):
        return False
    return path.startswith(("/dev/", "/proc/")) or not os.path.isfile(path)


def silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null: after a failed write to standard output (a closed
    pipe, a full disk), Python's flush at exit would fail again and print a second error."""
    try:
        descriptor = os.open(os.devnull, os.O_WRONLY)
        os.dup2(descriptor, sys.stdout.fileno())
        os.close(descriptor)
    except (AttributeError, OSError, ValueError):
        pass  # no real descriptor (tests capture stdout): nothing to silence


class OutputFile:
    """One output of a command, written by one thread: ``write(bytes or str)``, then
    ``close(success)`` (or ``finish()`` then ``commit()`` when several outputs must all be
    complete before any is renamed into place). A context manager: success when no exception."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = None if path is None or os.fspath(path) == "-" else os.fspath(path)
        self.name = self.path or "standard output"
        self._temporary: str | None = None
        self._target = self.path
        self._finished = self._closed = False
        if self.path is None:
            if sys.stdout is None:  # Python sets it None when descriptor 1 was closed at start
                raise BowmapError("standard output is closed: give an output file with -o")
            try:
                sys.stdout.flush()  # text printed before stays before
                self._stream = sys.stdout.buffer
            except (AttributeError, ValueError, OSError) as error:
                raise BowmapError(f"standard output: cannot write ({_cause(error)})") from None
            self._owns_stream = False
            return
        self._owns_stream = True
        if os.path.isdir(self.path):
            raise BowmapError(f"{self.path}: cannot write (is a directory)")
        try:
            if _writes_straight(self.path):
                self._stream = open(self.path, "wb", buffering=1 << 20)
                return
            self._target = os.path.realpath(self.path) if os.path.islink(self.path) else self.path
            folder, name = os.path.split(os.path.abspath(self._target))
            self._temporary = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            # O_EXCL: never reuse someone else's file; 0o666 lets the umask decide, as for any output.
            descriptor = os.open(self._temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            self._stream = os.fdopen(descriptor, "wb", buffering=1 << 20)
        except OSError as error:
            self._temporary = None
            raise BowmapError(f"{self.path}: cannot write ({_cause(error)})") from None

    def write(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        try:
            self._stream.write(data)
        except OSError as error:
            self._failed(error)

    def _failed(self, error: OSError):
        """Clean up after a failed write or flush and raise its one-line error; a closed pipe
        on standard output stays a BrokenPipeError (the CLI exits quietly, as samtools does)."""
        self.close(success=False)
        if self.path is None:
            silence_stdout()
            if isinstance(error, BrokenPipeError):
                raise error
        raise BowmapError(f"{self.name}: cannot write ({_cause(error)})") from None

    def finish(self) -> None:
        """Write out what is buffered and close the file (not yet renamed into place)."""
        if self._finished:
            return
        self._finished = True
        try:
            if self._owns_stream:
                self._stream.close()
            else:
                self._stream.flush()
        except OSError as error:
            self._failed(error)

    def commit(self) -> None:
        """Rename the finished temporary file onto the path."""
        self._closed = True
        if self._temporary is not None:
            try:
                os.replace(self._temporary, self._target)
            except OSError as error:
                self._remove_temporary()
                raise BowmapError(f"{self.path}: cannot write ({_cause(error)})") from None
            self._temporary = None

    def close(self, success: bool) -> None:
        """Finish and rename into place (``success``), or remove the temporary file."""
        if self._closed:
            return
        if success:
            self.finish()
            self.commit()
            return
        self._closed = True
        if self._owns_stream:
            try:
                self._stream.close()
            except OSError:
                pass  # the output is abandoned: a failed flush of its tail changes nothing
        self._remove_temporary()

    def _remove_temporary(self) -> None:
        if self._temporary is not None:
            try:
                os.remove(self._temporary)
            except OSError:
                pass
            self._temporary = None

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(success=kind is None)


def refuse_inputs(outputs, inputs) -> None:
    """Raise a usage error when an output (a dict option -> path, or such pairs) is the same
    file as an input (description -> path, likewise) or as another output: compared by device
    and inode, so a link or another spelling of the path is caught too. Call it before writing
    anything."""
    seen: dict[tuple[int, int], str] = {}
    for what, path in inputs.items() if isinstance(inputs, dict) else inputs:
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            continue  # a missing input fails on its own; "-" is standard input
        seen.setdefault((status.st_dev, status.st_ino), what)
    named: dict[str, str] = {}
    for option, path in outputs.items() if isinstance(outputs, dict) else outputs:
        if path in (None, "-"):
            continue
        resolved = os.path.realpath(path)
        if resolved in named and not _writes_straight(path):
            raise UsageError(f"{option} {path}: is also the output of {named[resolved]}; give each output its own file")
        named[resolved] = option
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            continue  # not there yet: nothing to overwrite
        if not os.path.isfile(path):
            continue  # a device or a pipe: written, never replaced
        key = (status.st_dev, status.st_ino)
        if key in seen:
            raise UsageError(f"{option} {path}: is {seen[key]}; refusing to overwrite it")
        seen[key] = f"the output of {option}"


# ------------------------------------------------------------------------------------ SAM/BAM

OUTPUT_FORMATS = ("sam", "bam")
# Names that say a format bowmap does not write: written as SAM they would mislead.
_UNWRITTEN = {".cram": "CRAM", ".gz": "gzip", ".bgz": "BGZF", ".bgzf": "BGZF", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd"}


def sam_output_format(path: str | None, requested: str | None) -> str:
    """``sam`` or ``bam``: ``requested`` (--output-fmt, any case) if given, else from the
    name's extension (any case; SAM for other names and standard output, as samtools does). A
    name that says a format bowmap does not write (.cram, .sam.gz) is a usage error."""
    if requested is not None:
        if requested.lower() not in OUTPUT_FORMATS:
            raise UsageError(f"--output-fmt {requested}: bowmap writes SAM or BAM (sam, bam)")
        return requested.lower()
    if path in (None, "-"):
        return "sam"
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension in _UNWRITTEN:
        raise UsageError(f"-o {path}: {_UNWRITTEN[extension]} output is not written; bowmap writes SAM (.sam) or BAM (.bam, or --output-fmt bam)")
    return "bam" if extension == ".bam" else "sam"


# samtools view, from the samtools that pysam ships, in a process of its own: SAM text in on
# standard input, BAM out on standard output.
# SIGINT ignored: ^C at a terminal reaches the whole process group, and the encoder must not die
# first, turning an interrupt into an encoding failure; the parent ends it.
_BAM_ENCODER = """
import signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
import pysam
try:
    pysam.samtools.view(*sys.argv[1:], catch_stdout=False)
except pysam.SamtoolsError as error:
    sys.stderr.write(str(getattr(error, "value", error)).split("stderr=", 1)[-1])
    sys.exit(1)
"""


class _BamEncoder:
    """SAM text in, BAM out to an :class:`OutputFile`, streamed while mapping.

    A child process runs ``samtools view -b`` (pysam's, so no samtools need be installed)
    reading SAM from a pipe; a thread here copies its BAM bytes into the output. Measured on
    200,000 100-bp reads: the child takes 2.6 s (one thread), 1.4 s with -@ 4; pysam's
    AlignedSegment.fromstring + AlignmentFile.write in this process takes 2.8 s and holds this
    process's GIL for all of it (a Python loop over reads), where the parent of a GPU run has no
    time to spare. The BAM passes through this process so that its errors ("No space left on
    device") and the temporary file are the output helper's, as for SAM; no path of ours reaches
    the header (--no-PG)."""

    def __init__(self, output: OutputFile, threads: int):
        import subprocess
        import tempfile
        import threading

        self._output = output
        self._errors = tempfile.TemporaryFile()
        command = [sys.executable, "-c", _BAM_ENCODER, "-b", "--no-PG", "-@", str(threads), "-o", "-", "-"]
        try:
            self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors)
        except OSError as error:
            raise BowmapError(f"{output.name}: cannot start the BAM encoder ({_cause(error)})") from None
        self._failure: BaseException | None = None
        self._copier = threading.Thread(target=self._copy, daemon=True, name="bowmap-bam")
        self._copier.start()

    def _copy(self) -> None:
        source = self._process.stdout
        try:
            while block := source.read1(1 << 20):
                self._output.write(block)
        except BaseException as error:  # noqa: BLE001 - raised again by write() or close()
            self._failure = error
        finally:
            source.close()  # the encoder, if still writing, stops (broken pipe) instead of waiting

    def _raise_failure(self) -> None:
        self._copier.join()
        self._process.wait()
        if self._failure is not None:
            raise self._failure
        self._errors.seek(0)
        lines = [line.strip() for line in self._errors.read().decode(errors="replace").splitlines() if line.strip()]
        detail = next((line for line in lines if line.startswith("[E::")), lines[0] if lines else "no message")
        raise BowmapError(f"{self._output.name}: BAM encoding failed ({detail[:200]})")

    def write(self, data: bytes) -> None:
        try:
            self._process.stdin.write(data)
        except OSError:  # the encoder stopped: its own error, or the output's
            self._raise_failure()

    def close(self, success: bool) -> None:
        if not success:
            self._process.kill()
        try:
            self._process.stdin.close()
        except OSError:
            pass  # the encoder has stopped: its exit status says why
        try:
            self._copier.join()
            if (self._process.wait() != 0 or self._failure is not None) and success:
                self._raise_failure()
        finally:
            self._errors.close()


class SamWriter:
    """The one owner of ``bowmap align``'s output (used by one thread): SAM or BAM
    (``output_format``, default from the name: see :func:`sam_output_format`) through an
    :class:`OutputFile`, so standard output, atomic renaming and devices behave as for every
    command. BAM is encoded while mapping, by :class:`_BamEncoder`.

    The output is opened at once (an output that cannot be written fails before any work), but
    the header is held back until the first :meth:`write` or a successful :meth:`close`: a run
    that fails before its first chunk is mapped (a reads file that does not parse, on standard
    input too; an index whose checksums do not match) writes nothing to standard output or a
    pipe, where no temporary file hides a failed output, and `| samtools sort` sees no header to
    make a valid, empty BAM of."""

    def __init__(self, path: str | None, header: str, output_format: str | None = None):
        self.format = sam_output_format(path, output_format)
        self._output = OutputFile(path)
        self.path = self._output.path
        self._encoder = None
        if self.format == "bam":
            try:
                threads = len(os.sched_getaffinity(0))
            except AttributeError:  # not Linux
                threads = os.cpu_count() or 1
            try:
                self._encoder = _BamEncoder(self._output, min(4, threads))
            except BaseException:
                self._output.close(success=False)
                raise
        self._closed = False
        self._header: bytes | None = header.encode()

    def write(self, data: bytes) -> None:
        if self._header is not None:
            header, self._header = self._header, None
            self.write(header)
        if self._encoder is None:
            self._output.write(data)
            return
        try:
            self._encoder.write(data)
        except BaseException:
            self.close(success=False)
            raise

    def close(self, success: bool) -> None:
        """Finish the output: flush and rename into place (``success``), or remove it."""
        if self._closed:
            return
        if success and self._header is not None:
            self.write(b"")  # no records (an empty input): the header alone
        self._closed = True
        try:
            if self._encoder is not None:
                self._encoder.close(success)
        except BaseException:
            self._output.close(success=False)
            raise
        self._output.close(success)

    def __enter__(self) -> SamWriter:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(success=kind is None)
