"""Owner of ``opencl/align/sam_fields.cl``: the CIGAR text, NM and MD of a chunk's mapped lines,
made on the device from the read codes and the packed text already there, in place of the host's
gathers and comparisons (:func:`bowmap.align.output.sam._alignment_fields`, the reference; the
tests compare them byte for byte); then the chunk's whole lines, written there from the values
the host computed (``sam_lines``: see :mod:`bowmap.align.output.sam_lines`). Why: with 15 host
workers the cores, not the GPU, bound a run (H200, chr20 and a 1 Gbp genome: each worker
process 83-88% of a core, 12% idle), and these fields took a sixth of a worker's time (py-spy)."""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from bowmap.align.output.sam import LineFields
from bowmap.runtime.deferred import DeferredReads, joined_columns
from bowmap.runtime.devices import DeviceArray, ReusedBuffer, make_kernel, work_group_size

SOURCE = "align/sam_fields.cl"
# Bytes of each line's CIGAR and MD texts that come back with the lengths (one synchronisation);
# only where a text is longer, the rest of every line's row, in a second one. A 150-base read's
# CIGAR and MD take a handful of bytes (a few mismatches, an indel).
HEAD_BYTES = 32


class SamFields:
    """The kernel, its reused buffers and a queue (the extend stage's): used by one thread."""

    def __init__(self, device, queue, text):
        program = device.program(SOURCE, (f"-DAMBIGUOUS_MASK={int(text.masked)}",))
        self._kernel = make_kernel(program, "sam_fields")
        self._group = work_group_size(self._kernel, device)
        self.queue = queue
        self.text = text
        context = device.context
        self._inputs = [ReusedBuffer(context, cl.mem_flags.READ_ONLY) for _ in range(7)]
        self._cigar, self._md, self._values = (ReusedBuffer(context, cl.mem_flags.READ_WRITE) for _ in range(3))
        self._line_kernel = make_kernel(program, "sam_lines")
        self._line_group = work_group_size(self._line_kernel, device)
        self._line_inputs = [ReusedBuffer(context, cl.mem_flags.READ_ONLY) for _ in range(8)]
        self._text = ReusedBuffer(context, cl.mem_flags.WRITE_ONLY)
        self._tables = None  # the last fields' rows on the device: (cigar, its pitch, md, its pitch, values, lines)

    def on(self, read_codes: DeviceArray) -> BoundSamFields:
        """:meth:`fields` and :meth:`lines` with the chunk's ``read_codes`` (as format_chunk's
        ``on_device`` takes them)."""
        return BoundSamFields(self, read_codes)

    def fields(self, read_codes: DeviceArray, ops, op_first, op_count, read_start, read_length, text_start, text_end) -> LineFields | None:
        """The fields of lines whose operations are ``ops[op_first[i]:][:op_count[i]]`` (BAM
        encoding), whose read's codes start at ``read_start[i]`` of ``read_codes`` (on this
        device) and whose alignment starts at text position ``text_start[i]`` of a contig ending
        at ``text_end[i]``. None where a line's CIGAR is wrong (an operation other than M I D S
        = X, a clip inside, other bases than its read's, past its contig): the reference then
        says which and how."""
        lines = len(op_first)
        if lines == 0:
            empty, none = np.zeros((0, 1), dtype=np.uint8), np.zeros(0, dtype=np.int64)
            self._tables = (self._cigar.at_least(1), 1, self._md.at_least(1), 1, self._values.at_least(4), 0)
            return LineFields(empty, none, none, empty, none, none)
        op_count = np.asarray(op_count, dtype=np.int64)
        ops = np.ascontiguousarray(ops, dtype=np.uint32)
        # Bounds of the texts (never exceeded): a CIGAR operation takes at most 10 digits and
        # its letter; MD at most three bytes a reference base (a count digit, a letter: "0A";
        # a deleted base) and two a operation, and the final count. A line's bases are bounded
        # by the sum of the operations from its first to the next line's first (its own at least).
        lengths = (ops >> np.uint32(4)).astype(np.int64)
        covered = np.add.reduceat(lengths, np.minimum(np.asarray(op_first, dtype=np.int64), len(ops) - 1)) if len(ops) else np.zeros(lines, np.int64)
        covered = np.where(op_count > 0, covered, 0)
        cigar_pitch = max(1, 11 * int(op_count.max(initial=0)))
        md_pitch = max(1, 3 * int(covered.max(initial=0)) + 2 * int(op_count.max(initial=0)) + 11)
        arrays = [ops if len(ops) else np.zeros(1, np.uint32)] + [
            np.ascontiguousarray(array, dtype=np.uint32) for array in (op_first, op_count, read_start, read_length)
        ] + [np.ascontiguousarray(array, dtype=np.uint64) for array in (text_start, text_end)]
        buffers = [staging.upload(self.queue, array) for staging, array in zip(self._inputs, arrays)]
        cigar = self._cigar.at_least(max(1, lines * cigar_pitch))
        md = self._md.at_least(max(1, lines * md_pitch))
        values_buffer = self._values.at_least(max(1, 5 * lines * 4))
        values = np.zeros((5, lines), dtype=np.int32)
        self._kernel(
            self.queue, (-(-lines // self._group) * self._group,), (self._group,), *buffers, read_codes.buffer,
            self.text.buffer, self.text.ambiguous, np.uint32(lines), np.uint32(cigar_pitch), np.uint32(md_pitch), cigar, md, values_buffer,
        )
        reads = DeferredReads(self.queue)
        reads.add(values, values_buffer)
        tables = ((cigar, cigar_pitch, values[0]), (md, md_pitch, values[1]))
        heads = [np.empty((lines, min(HEAD_BYTES, pitch)), dtype=np.uint8) for _, pitch, _ in tables]
        for head, (table, pitch, _) in zip(heads, tables):
            reads.add_columns(head, table, pitch)
        reads.wait()
        if values[4].any():
            self._tables = None
            return None
        self._tables = (cigar, cigar_pitch, md, md_pitch, values_buffer, lines)
        rests = [reads.add_rest(head, table, pitch, int(text_lengths.max())) for head, (table, pitch, text_lengths) in zip(heads, tables)]
        reads.wait()  # the texts past the heads, where any
        cigar_text, md_text = (joined_columns(head, rest) for head, rest in zip(heads, rests))
        as_int64 = values[:4].astype(np.int64)
        return LineFields(cigar_text, as_int64[0], as_int64[2], md_text, as_int64[1], as_int64[3])

    def lines(self, read_codes: DeviceArray, line_values: np.ndarray, long_values: np.ndarray, names: np.ndarray, qualities: np.ndarray | None,
              strings: np.ndarray, string_offsets: np.ndarray, tail: np.ndarray, read_group: bytes, size: int) -> bytearray:
        """The ``size`` bytes of lines written by ``sam_lines`` (see opencl/align/sam_fields.cl
        for ``line_values``, uint32 rows of L_* values a line, and ``long_values``, int64 POS,
        PNEXT and TLEN) from the CIGAR and MD rows of the last :meth:`fields` call."""
        if self._tables is None:
            raise RuntimeError("sam_lines needs the fields of the same lines first")
        cigar, cigar_pitch, md, md_pitch, values, value_lines = self._tables
        count = line_values.shape[1]
        arrays = [np.ascontiguousarray(line_values, dtype=np.uint32), np.ascontiguousarray(long_values, dtype=np.int64)] + [
            np.ascontiguousarray(array, dtype=dtype) if len(array) else np.zeros(1, dtype)
            for array, dtype in ((names, np.uint8), (qualities if qualities is not None else np.zeros(0), np.uint8), (strings, np.uint8),
                                 (string_offsets, np.uint32), (tail, np.uint8), (np.frombuffer(read_group, np.uint8), np.uint8))
        ]
        buffers = [staging.upload(self.queue, array) for staging, array in zip(self._line_inputs, arrays)]
        out = self._text.at_least(max(1, size))
        self._line_kernel(
            self.queue, (-(-count // self._line_group) * self._line_group,), (self._line_group,), buffers[0], buffers[1], buffers[2],
            buffers[3], read_codes.buffer, buffers[4], buffers[5], cigar, np.uint32(cigar_pitch), md, np.uint32(md_pitch), values,
            np.uint32(value_lines), buffers[6], buffers[7], np.uint32(len(read_group)), np.uint32(count), out,
        )
        text = bytearray(size)  # the SAM text as it goes out (the writers take any bytes-like)
        reads = DeferredReads(self.queue)
        reads.add(np.frombuffer(text, dtype=np.uint8), out)
        reads.wait()
        return text


class BoundSamFields:
    """A :class:`SamFields` with a chunk's read codes on its device."""

    def __init__(self, owner: SamFields, read_codes: DeviceArray):
        self.owner, self.read_codes = owner, read_codes

    def fields(self, *arguments) -> LineFields | None:
        return self.owner.fields(self.read_codes, *arguments)

    def lines(self, *arguments) -> bytearray:
        return self.owner.lines(self.read_codes, *arguments)

    def text(self, chunk, alignments, rows, context) -> bytearray:
        """The SAM text of a chunk's lines ``rows`` written here (format_chunk's, whose fields
        this made: :func:`bowmap.align.output.sam_lines.device_text`)."""
        from bowmap.align.output.sam_lines import device_text

        return device_text(chunk, alignments, rows, context, self)
