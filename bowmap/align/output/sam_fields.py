"""Owner of ``opencl/align/sam_fields.cl``: the CIGAR text, NM and MD of a chunk's mapped lines,
made on the device from the read codes and the packed text already there, in place of the host's
gathers and comparisons (:func:`bowmap.align.output.sam._alignment_fields`, the reference; the
tests compare them byte for byte). Why: with 15 host workers the cores, not the GPU, bound a
run (H200, chr20 and a 1 Gbp genome: each worker process 83-88% of a core, 12% idle), and these
fields took a sixth of a worker's time (py-spy)."""

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
        self._cigar, self._md, self._values = (ReusedBuffer(context, cl.mem_flags.WRITE_ONLY) for _ in range(3))

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
            return None
        rests = [reads.add_rest(head, table, pitch, int(text_lengths.max())) for head, (table, pitch, text_lengths) in zip(heads, tables)]
        reads.wait()  # the texts past the heads, where any
        cigar_text, md_text = (joined_columns(head, rest) for head, rest in zip(heads, rests))
        as_int64 = values[:4].astype(np.int64)
        return LineFields(cigar_text, as_int64[0], as_int64[2], md_text, as_int64[1], as_int64[3])

