"""The closest substring problem: owner of ``opencl/modules/closest_substring.cl`` and the Python API.

Given strings s_1..s_n, a window length L and a maximum distance d, find a centre string of length
L with a window (length-L substring) within Hamming distance d in every string, with the least
total distance. The pitch/chord method of Calhoun, Graham and Jiang:

* every window of s_1 is a *pitch*; the *note* of string s_i (i >= 2) is its window closest to
  the pitch (Hamming distance; leftmost on ties); the *chord* is the pitch and its notes; it is
  *valid* when every note is within d of the pitch; its *distance* is the sum of note distances;
* the best chord is the valid chord with the least distance, leftmost pitch on ties (when no chord
  is valid: the least largest note distance, then the least distance, then leftmost);
* its *root*, the column-wise majority of the pitch and the notes (ties to the symbol first in
  the alphabet's order: ACGT, or ACDEFGHIKLMNPQRSTVWY), is the answer. The root is scored again
  against every string: it may be better or worse than the pitch, so both are reported.

``exact=True`` (DNA, L <= MAX_EXACT_LENGTH) also searches all 4^L centres on the device for the
true optimum: the least maximum distance, then the least total distance; ties between centres go
to the lexicographically smallest centre (A < C < G < T).

Methods: ``s-gpu`` (a work-group per pitch, a work-item per string; the default: fastest),
``pp-gpu`` (a work-group per pitch and string, the string's windows split across work-items),
``sequential`` (the CPU reference, :mod:`bowmap.modules.closest_substring.reference`). All give the same
result. Positions are 0-based window starts in this API; the CLI prints them 1-based.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bowmap.modules.closest_substring import reference
from bowmap.modules.closest_substring.reference import KEY_EXCESS_SHIFT, KEY_TOTAL_SHIFT, padded
from bowmap.runtime.devices import DeviceContext
from bowmap.runtime.errors import BowmapError

SOURCE = "modules/closest_substring.cl"
ALPHABETS = {"dna": b"ACGT", "protein": b"ACDEFGHIKLMNPQRSTVWY"}
BITS_PER_SYMBOL = {"dna": 2, "protein": 5}
METHODS = ("s-gpu", "pp-gpu", "sequential")
DEFAULT_METHOD = "s-gpu"
MAX_EXACT_LENGTH = 14  # 4^14 = 268M centres; each base more costs 4x

MAX_LENGTH = (1 << (64 - KEY_EXCESS_SHIFT)) - 1
MAX_PITCHES = 1 << KEY_TOTAL_SHIFT
MAX_CHORD_TOTAL = 1 << (KEY_EXCESS_SHIFT - KEY_TOTAL_SHIFT)
EXACT_TOTAL_BITS = 24
NO_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)
EXACT_CENTRES_PER_LAUNCH = 1 << 22  # keeps each launch well under display-watchdog times


def symbol_codes(alphabet: str) -> np.ndarray:
    """Byte -> code (0-based position in the alphabet, either case); 255 for invalid bytes."""
    table = np.full(256, 255, dtype=np.uint8)
    symbols = np.frombuffer(ALPHABETS[alphabet], dtype=np.uint8)
    table[symbols] = np.arange(len(symbols), dtype=np.uint8)
    table[np.frombuffer(ALPHABETS[alphabet].lower(), dtype=np.uint8)] = np.arange(len(symbols), dtype=np.uint8)
    return table


def encode(sequences, alphabet: str = "dna") -> list[np.ndarray]:
    """Sequences (str or bytes) as uint8 code arrays; raises BowmapError at an invalid symbol."""
    if alphabet not in ALPHABETS:
        raise BowmapError(f"unknown alphabet {alphabet!r} (expected one of {', '.join(ALPHABETS)})")
    table = symbol_codes(alphabet)
    encoded = []
    for number, sequence in enumerate(sequences):
        raw = np.frombuffer(sequence.encode("ascii", "replace") if isinstance(sequence, str) else bytes(sequence), dtype=np.uint8)
        codes = table[raw]
        bad = np.flatnonzero(codes == 255)
        if len(bad):
            raise BowmapError(f"sequence {number + 1}: invalid {alphabet} symbol {chr(raw[bad[0]])!r} at position {bad[0] + 1}")
        encoded.append(codes)
    return encoded


def decode(codes: np.ndarray, alphabet: str) -> str:
    return np.frombuffer(ALPHABETS[alphabet], dtype=np.uint8)[np.asarray(codes, dtype=np.int64)].tobytes().decode()


def check_problem(codes: list[np.ndarray], length: int, max_distance: int, names=None) -> None:
    """BowmapError for an instance the kernels cannot take (one line naming the string)."""
    if len(codes) < 2:
        raise BowmapError(f"need at least 2 sequences, got {len(codes)}")
    if not 1 <= length <= MAX_LENGTH:
        raise BowmapError(f"window length {length} must be in 1..{MAX_LENGTH}")
    if max_distance < 0:
        raise BowmapError(f"maximum distance {max_distance} must not be negative")
    for number, string in enumerate(codes):
        if len(string) < length:
            label = repr(names[number]) if names is not None else f"{number + 1}"
            raise BowmapError(f"sequence {label} has {len(string)} symbols, fewer than the window length {length}")
    if len(codes[0]) - length + 1 > MAX_PITCHES:
        raise BowmapError(f"the first sequence has more than {MAX_PITCHES} windows (pitches)")
    if (len(codes) - 1) * length >= MAX_CHORD_TOTAL:
        raise BowmapError(f"{len(codes)} sequences of window length {length}: chord distances would overflow")


@dataclass(frozen=True)
class CentreReport:
    """One centre string scored against every input string.

    ``distances[i]``: Hamming distance from the centre to its closest window of string i;
    ``positions[i]``: that window's 0-based start (leftmost on ties). int64 arrays of length n.
    For the pitch, string 0's entry is the pitch itself and the others are its notes.
    """

    centre: str
    distances: np.ndarray
    positions: np.ndarray
    max_distance_allowed: int

    @property
    def max_distance(self) -> int:
        return int(self.distances.max())

    @property
    def total_distance(self) -> int:
        return int(self.distances.sum())

    @property
    def valid(self) -> bool:
        """Every string has a window within the maximum distance d of the centre."""
        return self.max_distance <= self.max_distance_allowed


@dataclass(frozen=True)
class ClosestSubstringResult:
    length: int
    max_distance: int
    method: str
    alphabet: str
    pitch_position: int  # 0-based start of the best pitch in the first string
    chord_distance: int  # sum of the note distances (strings 2..n)
    pitch: CentreReport
    root: CentreReport
    exact: CentreReport | None = None


def majority_root(windows: np.ndarray, alphabet_size: int) -> np.ndarray:
    """Column-wise majority of ``windows`` (uint8, rows x L); ties to the smallest code."""
    counts = (windows[:, :, None] == np.arange(alphabet_size, dtype=np.uint8)).sum(axis=0)
    return np.argmax(counts, axis=1).astype(np.uint8)  # argmax takes the first maximum


def exact_key(report: CentreReport) -> int:
    """(max << 24 | total) of a centre: the exact search's order, smaller is better."""
    return (report.max_distance << EXACT_TOTAL_BITS) | report.total_distance


def _power_of_two_at_most(value: int) -> int:
    return 1 << (max(1, int(value)).bit_length() - 1)


class ClosestSubstringSearch:
    """Kernels, a command queue and device buffers for one instance on one device.

    ``codes``: the strings as uint8 codes of ``alphabet`` (see :func:`encode`), already checked
    with :func:`check_problem`. Not thread-safe: one per thread. ``events`` holds the
    (name, event) pairs of the latest call's kernel launches, for profiling queues.
    """

    def __init__(self, device: DeviceContext, codes: list[np.ndarray], length: int, alphabet: str = "dna", queue=None):
        import pyopencl as cl

        self._cl = cl
        self.device = device
        self.queue = queue if queue is not None else device.queue()
        self.length = length
        self.alphabet = alphabet
        self.codes = codes
        self.string_count = len(codes)
        bits = BITS_PER_SYMBOL[alphabet]
        self.symbols_per_word = 32 // bits
        self.words = -(-length // self.symbols_per_word)
        matrix, counts = padded(codes, length)
        self.matrix = matrix
        self.window_counts = counts
        self.window_stride = int(counts.max())
        self.pitch_count = int(counts[0])
        packed = self._pack(matrix, bits)  # [n][W][WORDS]
        self._packed = packed
        options = (f"-DLENGTH={length}", f"-DBITS={bits}", f"-DWORDS={self.words}")
        self.program = device.program(SOURCE, options)
        mf = cl.mem_flags
        context = device.context
        self._windows = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(packed.transpose(1, 2, 0)))
        self._counts = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=counts.astype(np.uint32))
        self._by_string = None  # string-major copy, made when PP-GPU or the exact search needs it
        self._keys = cl.Buffer(context, mf.READ_WRITE, size=8 * self.pitch_count)
        self._result = cl.Buffer(context, mf.READ_WRITE, size=8)
        self.events: list[tuple[str, object]] = []

    # ---------------------------------------------------------------- layout

    def _pack(self, matrix: np.ndarray, bits: int) -> np.ndarray:
        """uint32[n][W][WORDS]: symbol k of window w in word k // per_word at bit bits * (k % per_word)."""
        window_count = matrix.shape[1] - self.length + 1
        packed = np.zeros((matrix.shape[0], window_count, self.words), dtype=np.uint32)
        for k in range(self.length):
            word, field = divmod(k, self.symbols_per_word)
            packed[:, :, word] |= matrix[:, k : k + window_count].astype(np.uint32) << np.uint32(bits * field)
        return packed

    def _string_major(self):
        if self._by_string is None:
            cl = self._cl
            array = np.ascontiguousarray(self._packed.transpose(0, 2, 1))
            self._by_string = cl.Buffer(self.device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=array)
        return self._by_string

    def _group_size(self, kernel, wanted: int, cap: int | None = None) -> int:
        """The smallest power of two >= wanted, within the kernel's limit (and ``cap``)."""
        cl = self._cl
        largest = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, self.device.device)
        if cap is not None:
            largest = min(largest, cap)
        return min(_power_of_two_at_most(largest), 1 << max(0, int(wanted) - 1).bit_length())

    def _launch(self, name: str, kernel, global_size, local_size, *arguments):
        event = kernel(self.queue, global_size, local_size, *arguments)
        self.events.append((name, event))
        return event

    # ---------------------------------------------------------------- chords

    def chord_keys(self, method: str, max_distance: int) -> np.ndarray:
        """Every pitch's chord key (uint64, see the .cl header), computed by ``method``."""
        self._chord_keys_on_device(method, max_distance)
        keys = np.empty(self.pitch_count, dtype=np.uint64)
        self._cl.enqueue_copy(self.queue, keys, self._keys, is_blocking=True)
        return keys

    def best_pitch(self, method: str, max_distance: int) -> tuple[int, int]:
        """(0-based pitch position, chord key) of the best chord, reduced on the device."""
        self._chord_keys_on_device(method, max_distance)
        key = self._min_key(self._keys, self.pitch_count)
        return int(key & np.uint64(MAX_PITCHES - 1)), int(key)

    def _chord_keys_on_device(self, method: str, max_distance: int) -> None:
        cl = self._cl
        self.events = []
        n = self.string_count
        if method == "s-gpu":
            kernel = cl.Kernel(self.program, "s_gpu_chords")
            group = self._group_size(kernel, n - 1)
            step = 1 << 16  # pitches a launch
            for first in range(0, self.pitch_count, step):
                pitches = min(step, self.pitch_count - first)
                self._launch(
                    "s_gpu_chords", kernel, (pitches * group,), (group,),
                    self._windows, self._counts, np.uint32(n), np.uint32(first), np.uint32(max_distance), self._keys,
                    cl.LocalMemory(4 * group), cl.LocalMemory(4 * group),
                )
        elif method == "pp-gpu":
            notes_kernel = cl.Kernel(self.program, "pp_gpu_notes")
            chords_kernel = cl.Kernel(self.program, "pp_gpu_chords")
            multiple = notes_kernel.get_work_group_info(cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, self.device.device)
            notes_group = self._group_size(notes_kernel, self.window_stride, cap=4 * multiple)
            chords_group = self._group_size(chords_kernel, n - 1)
            by_string = self._string_major()
            step = max(1, min(self.pitch_count, (1 << 24) // (n - 1)))  # note buffer <= 64 MiB
            notes = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE, size=4 * step * (n - 1))
            for first in range(0, self.pitch_count, step):
                pitches = min(step, self.pitch_count - first)
                self._launch(
                    "pp_gpu_notes", notes_kernel, ((n - 1) * notes_group, pitches), (notes_group, 1),
                    by_string, self._counts, np.uint32(self.window_stride), np.uint32(n), np.uint32(first), notes,
                    cl.LocalMemory(4 * notes_group),
                )
                self._launch(
                    "pp_gpu_chords", chords_kernel, (pitches * chords_group,), (chords_group,),
                    notes, np.uint32(n), np.uint32(first), np.uint32(max_distance), self._keys,
                    cl.LocalMemory(4 * chords_group), cl.LocalMemory(4 * chords_group),
                )
        else:
            raise ValueError(f"unknown device method {method!r}")

    def _min_key(self, keys_buffer, count: int) -> np.uint64:
        cl = self._cl
        kernel = cl.Kernel(self.program, "min_key")
        group = self._group_size(kernel, count, cap=256)
        self._launch("min_key", kernel, (group,), (group,), keys_buffer, np.uint32(count), self._result, cl.LocalMemory(8 * group))
        result = np.empty(1, dtype=np.uint64)
        cl.enqueue_copy(self.queue, result, self._result, is_blocking=True)
        return result[0]

    # ---------------------------------------------------------------- scoring centres

    def closest_windows(self, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For centres (uint8 codes, c x L): distances and 0-based leftmost positions of each
        string's closest window, int64 arrays c x n."""
        cl = self._cl
        centres = np.atleast_2d(np.asarray(centres, dtype=np.uint8))
        count = centres.shape[0]
        packed = self._pack(centres, BITS_PER_SYMBOL[self.alphabet]).reshape(count, self.words)
        mf = cl.mem_flags
        context = self.device.context
        centres_device = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(packed))
        size = 4 * count * self.string_count
        distances_device = cl.Buffer(context, mf.WRITE_ONLY, size=size)
        positions_device = cl.Buffer(context, mf.WRITE_ONLY, size=size)
        kernel = cl.Kernel(self.program, "closest_windows")
        group = self._group_size(kernel, self.string_count, cap=128)
        global_size = (-(-self.string_count // group) * group, count)
        self._launch(
            "closest_windows", kernel, global_size, (group, 1),
            self._windows, self._counts, np.uint32(self.string_count), centres_device, distances_device, positions_device,
        )
        distances = np.empty((count, self.string_count), dtype=np.uint32)
        positions = np.empty_like(distances)
        cl.enqueue_copy(self.queue, distances, distances_device)
        cl.enqueue_copy(self.queue, positions, positions_device, is_blocking=True)
        return distances.astype(np.int64), positions.astype(np.int64)

    # ---------------------------------------------------------------- exact search

    def exact_centre(self, bound: int | None = None, centres_per_launch: int = EXACT_CENTRES_PER_LAUNCH,
                     tile_size: int | None = None) -> tuple[np.ndarray, int]:
        """The optimal centre over all 4^L DNA strings: (uint8 codes, max << 24 | total).

        ``bound``: the key (max << 24 | total) of any known centre, e.g. the heuristic's root;
        centres strictly worse are skipped early, which changes no result. ``tile_size``
        (windows staged in local memory at once) defaults from the device's local memory.
        """
        cl = self._cl
        if self.alphabet != "dna" or self.words != 1 or self.length > MAX_EXACT_LENGTH:
            raise BowmapError(f"the exact search needs DNA and a window length of at most {MAX_EXACT_LENGTH}")
        if self.string_count * self.length >= 1 << EXACT_TOTAL_BITS:
            raise BowmapError(f"the exact search takes fewer than {(1 << EXACT_TOTAL_BITS) // self.length} sequences at this length")
        self.events = []
        kernel = cl.Kernel(self.program, "exact_centres")
        group = self._group_size(kernel, 256, cap=256)
        if tile_size is None:
            room = (self.device.device.local_mem_size - 8 * group - 64) // 4
            tile_size = max(1, min(self.window_stride, 4096, room))
        centre_count = 4**self.length
        centres_per_launch = max(group, centres_per_launch // group * group)
        group_total = -(-centre_count // group)
        mf = cl.mem_flags
        context = self.device.context
        group_keys = cl.Buffer(context, mf.READ_WRITE, size=8 * group_total)
        start = np.array([0xFFFFFFFF if bound is None else bound], dtype=np.uint32)
        bound_device = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=start)
        by_string = self._string_major()
        for first in range(0, centre_count, centres_per_launch):
            count = min(centres_per_launch, centre_count - first)
            self._launch(
                "exact_centres", kernel, (-(-count // group) * group,), (group,),
                by_string, self._counts, np.uint32(self.window_stride), np.uint32(self.string_count),
                np.uint32(first), np.uint32(count), np.uint32(tile_size), bound_device, group_keys,
                np.uint32(first // group), cl.LocalMemory(4 * tile_size), cl.LocalMemory(8 * group), cl.LocalMemory(4),
            )
        key = int(self._min_key(group_keys, group_total))
        if key == int(NO_KEY):
            raise AssertionError("the exact search kept no centre although the bound came from a centre")
        index = key & 0xFFFFFFFF
        centre = ((index >> (2 * (self.length - 1 - np.arange(self.length)))) & 3).astype(np.uint8)
        return centre, key >> 32


# -------------------------------------------------------------------- API


def _report(centre: np.ndarray, distances, positions, alphabet: str, max_distance: int) -> CentreReport:
    return CentreReport(decode(centre, alphabet), np.asarray(distances, dtype=np.int64), np.asarray(positions, dtype=np.int64), max_distance)


def assemble(codes, matrix, length, max_distance, alphabet, method, pitch_position, note_distances, note_positions,
             root_scorer) -> ClosestSubstringResult:
    """The result from the best pitch and its notes (string 0's entries are replaced by the pitch
    itself); ``root_scorer(root codes)`` gives the root's (distances, positions)."""
    note_distances = np.array(note_distances, dtype=np.int64)
    note_positions = np.array(note_positions, dtype=np.int64)
    note_distances[0], note_positions[0] = 0, pitch_position
    rows = np.arange(len(codes))[:, None]
    chord_windows = matrix[rows, note_positions[:, None] + np.arange(length)]
    root = majority_root(chord_windows, len(ALPHABETS[alphabet]))
    root_distances, root_positions = root_scorer(root)
    pitch = chord_windows[0]
    return ClosestSubstringResult(
        length=length,
        max_distance=max_distance,
        method=method,
        alphabet=alphabet,
        pitch_position=int(pitch_position),
        chord_distance=int(note_distances.sum()),
        pitch=_report(pitch, note_distances, note_positions, alphabet, max_distance),
        root=_report(root, root_distances, root_positions, alphabet, max_distance),
    )


def closest_substring(sequences, length: int, max_distance: int, alphabet: str = "dna", method: str = DEFAULT_METHOD,
                      exact: bool = False, device: DeviceContext | None = None, names=None) -> ClosestSubstringResult:
    """Solve the closest substring problem for ``sequences`` (str, bytes or uint8 code arrays).

    ``device``: where the kernels run (default: the first device :func:`bowmap.runtime.devices.open_devices`
    picks); the ``sequential`` method runs on the CPU, except ``exact``, which always uses the
    device. ``names`` (optional) label sequences in error messages.
    """
    if method not in METHODS:
        raise BowmapError(f"unknown method {method!r} (expected one of {', '.join(METHODS)})")
    if alphabet not in ALPHABETS:
        raise BowmapError(f"unknown alphabet {alphabet!r} (expected one of {', '.join(ALPHABETS)})")
    codes = [np.asarray(s, dtype=np.uint8) if isinstance(s, np.ndarray) else s for s in sequences]
    codes = [c if isinstance(c, np.ndarray) else encode([c], alphabet)[0] for c in codes]
    for number, string in enumerate(codes):
        if string.ndim != 1 or (len(string) and int(string.max()) >= len(ALPHABETS[alphabet])):
            raise BowmapError(f"sequence {number + 1}: codes must be a 1-D array of values below {len(ALPHABETS[alphabet])} ({alphabet})")
    check_problem(codes, length, max_distance, names)
    if exact and (alphabet != "dna" or length > MAX_EXACT_LENGTH):
        raise BowmapError(f"--exact needs the DNA alphabet and a window length of at most {MAX_EXACT_LENGTH} (got {alphabet}, {length})")
    search = None
    if method != "sequential" or exact:
        if device is None:
            from bowmap.runtime.devices import open_devices

            device = open_devices(None)[0]
        search = ClosestSubstringSearch(device, codes, length, alphabet)
    if method == "sequential":
        matrix, counts = padded(codes, length)
        pitch_position = reference.best_pitch(codes, length, max_distance)
        pitch = matrix[0, pitch_position : pitch_position + length]
        note_distances, note_positions = reference.closest_windows(codes, pitch)

        def score(root):
            return reference.closest_windows(codes, root)
    else:
        matrix = search.matrix
        pitch_position, _ = search.best_pitch(method, max_distance)
        pitch = matrix[0, pitch_position : pitch_position + length]
        distances, positions = search.closest_windows(pitch)
        note_distances, note_positions = distances[0], positions[0]

        def score(root):
            distances, positions = search.closest_windows(root)
            return distances[0], positions[0]

    result = assemble(codes, matrix, length, max_distance, alphabet, method, pitch_position, note_distances, note_positions, score)
    if exact:
        bound = min(exact_key(result.root), exact_key(result.pitch))
        centre, key = search.exact_centre(bound)
        distances, positions = search.closest_windows(centre)
        report = _report(centre, distances[0], positions[0], alphabet, max_distance)
        if exact_key(report) != key:
            raise AssertionError(f"exact search key {key} disagrees with the centre's own score {exact_key(report)}")
        result = ClosestSubstringResult(**{**result.__dict__, "exact": report})
    return result
