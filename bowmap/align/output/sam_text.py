"""Text for SAM formatting (bowmap.align.output.sam), built with NumPy for many lines at once: a
field of many lines is a ``uint8`` matrix of left-aligned rows and each row's length, and lines are
assembled by writing their fields at exact offsets (:func:`assemble`)."""

from __future__ import annotations

import numpy as np

from bowmap.runtime.arrays import exclusive_cumsum, windows


def rows_of(flat: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """:func:`bowmap.runtime.arrays.windows` (rows ``flat[start : start + width]``, a copy; past
    the end reads 0), through a view made without ``sliding_window_view``'s checks: the
    formatter gathers rows a few hundred times a chunk."""
    starts = np.asarray(starts, dtype=np.int64)
    if len(starts) and width and flat.ndim == 1 and flat.flags.c_contiguous and len(flat) >= width and int(starts.max()) <= len(flat) - width:
        view = np.ndarray((len(flat) - width + 1, width), dtype=flat.dtype, buffer=flat, strides=(flat.itemsize, flat.itemsize))
        return view[starts]
    return windows(flat, starts, width)


_STEPS: dict[int, np.ndarray] = {}


def prefix_mask(lengths: np.ndarray, width: int) -> np.ndarray:
    """Boolean (len(lengths), width) matrix, row i True in its first ``lengths[i]`` columns
    (lengths in 0..width): rows of a step, as :func:`bowmap.runtime.arrays.prefix_mask`."""
    step = _STEPS.get(width)
    if step is None:
        step = np.zeros(2 * width, dtype=bool)
        step[:width] = True
        _STEPS[width] = step
    return rows_of(step, width - np.asarray(lengths, dtype=np.int64), width)


def segment_sum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sums of consecutive segments of ``values`` with ``counts`` elements each (0 allowed)."""
    totals = np.concatenate(([0], np.cumsum(values, dtype=np.int64)))
    ends = np.cumsum(counts, dtype=np.int64)
    return totals[ends] - totals[ends - counts]


# Decimal text of 0..9999 as little-endian 32-bit words of four bytes, unpadded (NULs after the
# digits) and zero-padded to four digits: a number is one word gathered, not four bytes.
_SMALL_NUMBERS = np.array([str(number).encode() for number in range(10000)], dtype="S4").view("<u4")
_DIGIT_GROUPS = np.array([f"{number:04d}".encode() for number in range(10000)], dtype="S4").view("<u4")
_SMALL_WORDS = _SMALL_NUMBERS.astype(np.uint64)
_GROUP_WORDS = _DIGIT_GROUPS.astype(np.uint64)


def decimal_text(values: np.ndarray) -> np.ndarray:
    """Decimal text of integers as a NUL-padded (n, width) uint8 matrix (:func:`decimal_rows`
    with the bytes past each row's text cleared)."""
    digits, lengths = decimal_rows(values)
    return digits * prefix_mask(lengths, digits.shape[1])


def constant_text(text: bytes, rows: int) -> np.ndarray:
    return np.broadcast_to(np.frombuffer(text, dtype=np.uint8), (rows, len(text)))


# ------------------------------------------------------------------ left-aligned rows, exact lines
#
# The formatter's fields as (matrix, lengths): row i's text is matrix[i, :lengths[i]], what lies
# after it unspecified (rows gathered through windows keep the bytes that follow them, no
# clearing). Lines are assembled by writing each field's rows, padded, at their exact offsets in
# the output, field after field: a row's bytes past its length land on the fields after it in the
# same line, which are written later; a row whose padded width would cross its line's end is
# written exactly instead. No NUL padding is ever dropped.

_SMALL_LENGTHS = np.array([len(str(number)) for number in range(10000)], dtype=np.int64)
_POWERS = 10 ** np.arange(1, 20, dtype=np.uint64)  # 10 .. 10**19


def decimal_rows(values: np.ndarray, prefix: bytes = b"") -> tuple[np.ndarray, np.ndarray]:
    """``prefix`` then the decimal text of each integer, left-aligned rows: (matrix, lengths).

    Numbers below 10**8 (above -10**7) are one little-endian 64-bit word each (its digits, NULs
    after), and the prefix is shifted in front of the word, not copied column by column."""
    values = np.asarray(values, dtype=np.int64)
    count, before = len(values), len(prefix)
    if count == 0:
        return np.zeros((0, before + 1), dtype=np.uint8), np.zeros(0, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if low >= 0 and high < 10000:
        words = np.take(_SMALL_WORDS, values)
        lengths = _SMALL_LENGTHS[values]
        longest = int(_SMALL_LENGTHS[high])
    elif low > -(10**7) and high < 10**8:
        # The leading group of four digits unpadded, the next zero-padded after it, the sign
        # shifted in front.
        magnitude = np.abs(values)
        high_group, low_group = np.divmod(magnitude, 10000)
        high_lengths = _SMALL_LENGTHS[high_group]
        split = high_group > 0
        words = np.take(_SMALL_WORDS, np.where(split, high_group, low_group))
        words |= np.where(split, np.take(_GROUP_WORDS, low_group) << (high_lengths.astype(np.uint64) * np.uint64(8)), np.uint64(0))
        lengths = np.where(split, high_lengths + 4, _SMALL_LENGTHS[low_group])
        if low < 0:
            negative = values < 0
            words = np.where(negative, (words << np.uint64(8)) | np.uint64(ord("-")), words)
            lengths = lengths + negative
        longest = int(lengths.max())
    else:
        quick = (values > -(10**7)) & (values < 10**8)
        if not quick.any():
            return _long_decimal_rows(values, prefix)
        # A few long numbers (a position past 100 Mbp, a far mate's TLEN): those rows alone.
        text, lengths = decimal_rows(np.where(quick, values, 0), prefix)
        slow = np.flatnonzero(~quick)
        long_text, long_lengths = _long_decimal_rows(values[slow], prefix)
        if long_text.shape[1] > text.shape[1]:
            text = np.concatenate((text, np.zeros((count, long_text.shape[1] - text.shape[1]), dtype=np.uint8)), axis=1)
        text[slow, : long_text.shape[1]] = long_text
        lengths[slow] = long_lengths
        return text, lengths
    if not before:
        return words.view(np.uint8).reshape(count, 8), lengths
    if before + longest > 16 or before >= 8:
        return _with_prefix(words.view(np.uint8).reshape(count, 8)[:, :longest], lengths, prefix)
    prefix_word = np.uint64(int.from_bytes(prefix, "little"))
    shift = np.uint64(8 * before)
    if before + longest <= 8:
        text = (words << shift) | prefix_word
        return text.view(np.uint8).reshape(count, 8), lengths + before
    text = np.empty((count, 2), dtype=np.uint64)
    np.bitwise_or(words << shift, prefix_word, out=text[:, 0])
    np.right_shift(words, np.uint64(64 - 8 * before), out=text[:, 1])
    return text.view(np.uint8).reshape(count, 16), lengths + before


def decimal_lengths(values: np.ndarray) -> np.ndarray:
    """The length of each integer's decimal text (int64), as :func:`decimal_rows` writes it."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) and int(values.min()) >= 0 and int(values.max()) < 10000:
        return _SMALL_LENGTHS[values]
    magnitude = np.where(values < 0, ~values.view(np.uint64) + np.uint64(1), values.view(np.uint64))
    return 1 + np.searchsorted(_POWERS, magnitude, side="right").astype(np.int64) + (values < 0)


def _long_decimal_rows(values: np.ndarray, prefix: bytes) -> tuple[np.ndarray, np.ndarray]:
    """:func:`decimal_rows` of any int64: zero-padded groups of four digits, right-aligned behind
    a column for the sign; each row's text then starts d (+1 for '-') columns before the end
    and is cut out there."""
    count = len(values)
    negative = values < 0
    magnitude = np.where(negative, ~values.view(np.uint64) + np.uint64(1), values.view(np.uint64))
    groups = -(-len(str(int(magnitude.max()))) // 4)
    scales = np.uint64(10000) ** np.arange(groups - 1, -1, -1, dtype=np.uint64)
    width = 4 * groups + 1
    full = np.empty((count, width), dtype=np.uint8)
    full[:, 1:] = np.take(_DIGIT_GROUPS, (magnitude[:, None] // scales % np.uint64(10000)).astype(np.intp)).view(np.uint8).reshape(count, width - 1)
    lengths = 1 + np.searchsorted(_POWERS, magnitude, side="right").astype(np.int64) + negative
    first = width - lengths
    full[np.flatnonzero(negative), first[negative]] = ord("-")
    digits = rows_of(full.reshape(-1), np.arange(count, dtype=np.int64) * width + first, width)
    return _with_prefix(digits, lengths, prefix) if prefix else (digits, lengths)


def _with_prefix(digits: np.ndarray, lengths: np.ndarray, prefix: bytes) -> tuple[np.ndarray, np.ndarray]:
    before = len(prefix)
    width = before + digits.shape[1]
    text = np.empty((len(digits), _word_width(width)), dtype=np.uint8)
    text[:, :before] = np.frombuffer(prefix, dtype=np.uint8)
    text[:, before:width] = digits
    return text, lengths + before


def _word_width(width: int) -> int:
    """Columns to give a matrix of ``width``: 8 or 16 where it fits, so that :func:`_place` can
    write its rows as single 8- or 16-byte elements; else ``width``."""
    return 8 if width <= 8 else max(16, width)


def table_rows(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """A small table of texts as left-aligned rows (at least one column): (matrix, lengths)."""
    lengths = np.array([len(text) for text in texts], dtype=np.int64)
    table = np.zeros((len(texts), _word_width(max(int(lengths.max(initial=0)), 1))), dtype=np.uint8)
    for row, text in enumerate(texts):  # a few rows (contig names, constants), not reads
        table[row, : len(text)] = np.frombuffer(text, dtype=np.uint8)
    return table, lengths


def constant_rows(text: bytes, rows: int) -> tuple[np.ndarray, np.ndarray]:
    return constant_text(text, rows), np.full(rows, len(text), dtype=np.int64)


def joined_rows(pieces: np.ndarray, piece_lengths: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows made of consecutive runs of ``counts`` left-aligned pieces each: (matrix, lengths)."""
    flat = pieces[prefix_mask(piece_lengths, pieces.shape[1])]
    lengths = segment_sum(piece_lengths, counts)
    return rows_of(flat, exclusive_cumsum(lengths), max(int(lengths.max(initial=0)), 1)), lengths


def assemble(count: int, fields: list) -> tuple[np.ndarray, np.ndarray]:
    """``count`` lines made of ``fields`` in order, each (matrix, lengths, rows): left-aligned rows
    for the lines ``rows`` (None: every line; a field may leave lines out, two fields may share
    a place with disjoint rows). Returns the lines' bytes, concatenated, and each line's length."""
    totals = np.zeros(count, dtype=np.int64)
    for _, lengths, rows in fields:
        if rows is None:
            totals += lengths
        else:
            totals[rows] += lengths
    starts = exclusive_cumsum(totals)
    size = int(totals.sum())
    out = np.empty(size + max(matrix.shape[1] for matrix, _, _ in fields), dtype=np.uint8)
    # A row may spill past its line into the first bytes of the next, as far as every line's
    # first field reaches: those bytes are written again, exactly, once all fields are down.
    first, first_lengths, first_rows = fields[0]
    again = min(int(first_lengths.min()), first.shape[1]) if first_rows is None and count else 0
    limits = starts + totals + again
    if count:
        limits[-1] = len(out)  # the last line may spill into the spare end
    cursor = starts.copy()
    for matrix, lengths, rows in fields:
        if rows is None:
            _place(out, cursor, matrix, lengths, limits)
            cursor += lengths
        else:
            _place(out, cursor[rows], matrix, lengths, limits[rows])
            cursor[rows] += lengths
    if again and count > 1:
        _rows_at(out, again)[starts[1:]] = first[1:, :again]
    return out[:size], totals


_NARROW = 32  # bytes: rows of a wide field no longer than this are written through this width


def _rows_at(out: np.ndarray, width: int) -> np.ndarray:
    """Writable view of ``out`` whose row k is ``out[k : k + width]``."""
    return np.ndarray((len(out) - width + 1, width), dtype=np.uint8, buffer=out, strides=(1, 1))


def _place(out: np.ndarray, positions: np.ndarray, matrix: np.ndarray, lengths: np.ndarray, limits: np.ndarray) -> None:
    """Rows of ``matrix`` written at ``positions`` of ``out``, whole where they end by their
    ``limits``, else only their ``lengths`` bytes."""
    if len(positions) == 0:
        return
    width = matrix.shape[1]
    if width > _NARROW:
        # A few long rows (one MD of many mismatches, a long name) would make every row's
        # padding reach past its line: the rows that fit go through a narrower window.
        short = lengths <= _NARROW
        if short.any() and not short.all():
            _place(out, positions[short], matrix[short, :_NARROW], lengths[short], limits[short])
            long = ~short
            positions, matrix, lengths, limits = positions[long], matrix[long], lengths[long], limits[long]
    if width <= 16 and len(positions) > 64:
        # Rows of 8 or 16 bytes (a contiguous matrix of that width, or one constant row) go as
        # single elements: a third of the cost of a row copy.
        size = 8 if width <= 8 else 16
        if matrix.strides[0] == 0:
            row = np.zeros(size, dtype=np.uint8)
            row[:width] = matrix[0]
            values = row.view(f"V{size}")[0]
        elif width == size and matrix.flags.c_contiguous:
            values = matrix.view(f"V{size}")[:, 0]
        else:
            values = None
        if values is not None:
            fits = positions + size <= limits
            words = np.ndarray((len(out) - size + 1,), dtype=f"V{size}", buffer=out, strides=(1,))
            if fits.all():
                words[positions] = values
                return
            words[positions[fits]] = values if matrix.strides[0] == 0 else values[fits]
            rest = ~fits
            positions, matrix, lengths, limits = positions[rest], matrix[rest], lengths[rest], limits[rest]
            width = max(int(lengths.max()), 1)  # the rest through their own width
            matrix = matrix[:, :width]
    over = positions + width > limits
    if not over.any():
        _rows_at(out, width)[positions] = matrix
        return
    fits = ~over
    _rows_at(out, width)[positions[fits]] = matrix[fits]
    # The others exactly, in pieces of 2^k bytes: a row writes the pieces its length's bits name,
    # longest first (a write of one width a bit, none wider than the row's length).
    positions, lengths = positions[over], lengths[over]
    flat = np.ascontiguousarray(matrix[over]).reshape(-1)
    done = np.arange(len(positions), dtype=np.int64) * width
    for bit in range(int(lengths.max(initial=0)).bit_length() - 1, -1, -1):
        size = 1 << bit
        rows = np.flatnonzero(lengths & size)
        if len(rows):
            _rows_at(out, size)[positions[rows]] = rows_of(flat, done[rows], size)
            positions[rows] += size
            done[rows] += size


# ------------------------------------------------------------------------------- NM and MD

_BASE_LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
_DELETION = 2  # the BAM CIGAR code of D

_ANY_ABOVE_THREE = np.uint64(0xFCFCFCFCFCFCFCFC)


def mismatches(read_codes: np.ndarray, reference_codes: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of every base of two (rows, width) code matrices that differs (or where
    either holds a code above 3, an N), within each row's first ``lengths`` columns, in row-major
    order. Compared eight bases a word; the words that differ are few (most rows are a whole
    read's bases, near-equal to the reference's), so they are found first."""
    count, width = read_codes.shape
    read_flat, reference_flat = read_codes.reshape(-1), reference_codes.reshape(-1)
    whole = len(read_flat) // 8 * 8
    differ = np.empty(len(read_flat), dtype=np.uint8)
    differ_words = differ[:whole].view(np.uint64)
    read_words, reference_words = read_flat[:whole].view(np.uint64), reference_flat[:whole].view(np.uint64)
    np.bitwise_xor(read_words, reference_words, out=differ_words)
    either = read_words | reference_words
    either &= _ANY_ABOVE_THREE
    differ_words |= either
    read_tail, reference_tail = read_flat[whole:], reference_flat[whole:]
    differ[whole:] = (read_tail ^ reference_tail) | ((read_tail | reference_tail) & 0xFC)
    short = np.flatnonzero(lengths < width)
    if len(short):  # the columns past a row's length hold other bases: cleared
        rows = differ.reshape(count, width)
        rows[short] *= prefix_mask(lengths[short], width)
    words = np.flatnonzero(differ_words)
    in_words = np.flatnonzero(differ_words[words].view(np.uint8))
    places = words[in_words >> 3] * 8 + (in_words & 7)
    tail = np.flatnonzero(differ[whole:])
    if len(tail):
        places = np.concatenate((places, whole + tail))
    return np.divmod(places, width)


def md_rows(reference, span, op_row, op_length, op_code, reference_before, text_start, mismatch_row, mismatch_offset, mismatch_code):
    """MD of ``len(span)`` lines as left-aligned rows (matrix, lengths): events (a mismatched
    base, a deletion) in reference order, each preceded by the count of matching bases since the
    previous event; a final count ends every row. Built as items, one a matrix row (a count then
    its event's letter or '^'; the final count), joined, the deleted bases inserted after their
    '^'."""
    count = len(span)
    deletion = np.flatnonzero(op_code == _DELETION)
    event_row = np.concatenate((mismatch_row, op_row[deletion]))
    event_offset = np.concatenate((mismatch_offset, reference_before[deletion]))
    event_span = np.concatenate((np.ones(len(mismatch_row), dtype=np.int64), op_length[deletion]))
    event_letter = np.concatenate((_BASE_LETTERS[np.minimum(mismatch_code, 4)], np.full(len(deletion), ord("^"), dtype=np.uint8)))
    if len(deletion):
        # Mismatches and deletions are each in reference order already: a stable sort merges them
        # (and keeps the deletions in operation order).
        order = np.argsort(exclusive_cumsum(span)[event_row] + event_offset, kind="stable")
        event_row, event_offset, event_span, event_letter = event_row[order], event_offset[order], event_span[order], event_letter[order]
    events = len(event_row)
    events_per_row = np.bincount(event_row, minlength=count)
    first_event = exclusive_cumsum(events_per_row)
    event_end = event_offset + event_span
    previous_end = np.zeros(events, dtype=np.int64)
    previous_end[1:] = event_end[:-1]
    previous_end[first_event[events_per_row > 0]] = 0
    last_end = np.zeros(count, dtype=np.int64)
    has_events = events_per_row > 0
    last_end[has_events] = event_end[first_event[has_events] + events_per_row[has_events] - 1]

    # Items in row order: row r's events then its final count (event k of row r is item
    # first_event[r] + r + k).
    items_per_row = events_per_row + 1
    final_item = np.cumsum(items_per_row) - 1
    is_final = np.zeros(events + count, dtype=bool)
    is_final[final_item] = True
    counts = np.empty(events + count, dtype=np.int64)
    counts[final_item] = span - last_end
    counts[~is_final] = event_offset - previous_end
    items, item_lengths = decimal_rows(counts)
    items = np.concatenate((items, np.zeros((len(items), 1), dtype=np.uint8)), axis=1)
    event_item = np.flatnonzero(~is_final)
    items[event_item, item_lengths[event_item]] = event_letter
    item_lengths[event_item] += 1
    if not len(deletion):
        return joined_rows(items, item_lengths, items_per_row)
    flat = items[prefix_mask(item_lengths, items.shape[1])]
    deleted_item = event_item[event_letter == ord("^")]
    after_caret = (exclusive_cumsum(item_lengths) + item_lengths)[deleted_item]
    deleted_bases = _BASE_LETTERS[np.minimum(reference.spans(text_start[deletion], op_length[deletion]), 4)]
    flat = np.insert(flat, np.repeat(after_caret, op_length[deletion]), deleted_bases)
    item_lengths[deleted_item] += op_length[deletion]
    lengths = segment_sum(item_lengths, items_per_row)
    return rows_of(flat, exclusive_cumsum(lengths), max(int(lengths.max(initial=0)), 1)), lengths
