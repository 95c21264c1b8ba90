"""The seed/filter stage: a chunk's seeds -> FM search (kernel) -> located hits -> candidate
reference windows, as BowMapCL and bowtie2 do it, on the device (:class:`DeviceWindows`,
``opencl/align/seed_windows.cl``) or on the host (:meth:`SeedFilter._merge_on_host`, its reference).

Coordinates: text positions (0-based, over the concatenated contigs); windows are half-open
[start, end) and never cross a contig boundary. Strand: ``reverse`` windows are where the read's
reverse complement aligns.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from bowmap.align.seed.fm_search import (
    DeviceBlock,
    DeviceHits,
    FMSearch,
    HitBuffers,
    OverlapTable,
    seed_hits_fit,
)
from bowmap.align.seed.seeds import (
    SeedOptions,
    Seeds,
    choose_seeds,
    extract_seeds,
    kmer_keys,
    pack_codes,
)
from bowmap.index.load import FMIndex
from bowmap.runtime.arrays import lexsort, prefix_mask, run_ranks, unique


@dataclass
class Windows:
    """Candidate windows of a chunk, sorted by (read, reverse, start)."""

    read: np.ndarray  # int64: read index within the chunk
    reverse: np.ndarray  # bool
    start: np.ndarray  # int64 text position
    end: np.ndarray  # int64 text position, exclusive
    hits: np.ndarray  # int64: read positions whose seeds hit the window (each counted once)

    FIELDS = ("read", "reverse", "start", "end", "hits")

    def __len__(self) -> int:
        return len(self.read)


class SeedFilter:
    """Seeds, searches and locates a chunk's reads on one device queue (one per worker thread).

    Hits become windows on the same device (:class:`DeviceWindows`) when ``searcher`` is an
    :class:`FMSearch` and the index fits the kernel's keys; otherwise, or with
    ``windows_on_device=False``, on the host (:meth:`_merge_on_host`, the kernel's reference).
    With windows on the device, the hits are made there too and never come to the host
    (:meth:`FMSearch.seed_hits`, whatever the index's blocks; ``hits_on_device=False``: by
    :meth:`_hits`, its reference)."""

    def __init__(self, index: FMIndex, device_blocks: list[DeviceBlock], searcher: FMSearch, options: SeedOptions,
                 windows_on_device: bool = True, hits_on_device: bool = True):
        self.index = index
        self.device_blocks = device_blocks
        self.searcher = searcher
        self.options = options
        if max(options.seed_length, options.reseed_length, options.long_seed_length) > 32:
            raise ValueError("seeds are at most 32 bases (packed into 64-bit keys)")
        self._overlap_tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # seed length -> (keys, counts)
        self._device_overlap_tables: dict[int, OverlapTable] = {}  # the same on the device, for seed_hits
        self.device_windows = None
        if windows_on_device and isinstance(searcher, FMSearch) and DeviceWindows.fits(index):
            self.device_windows = DeviceWindows(searcher.device, searcher.queue, index, options)
        # One set of buffers a round that may be merged with others: first, long and re-seeded.
        self._hit_buffers = None
        if hits_on_device and self.device_windows is not None and device_blocks and all(seed_hits_fit(block.block) for block in device_blocks):
            self._hit_buffers = [HitBuffers(searcher.device) for _ in range(3)]

    def windows(self, codes, reverse_codes, read_offsets, joined=None) -> Windows:
        """Candidate windows of every read. Reads with a seed too repetitive to locate (more than
        max_occurrences, or past the read's budget) are also seeded with long seeds, whose
        hits join the first round's: in an interspersed repeat (an Alu, a LINE) a 32-base exact
        match singles out the read's own copy where 20 bases match thousands, as BWA-MEM's
        maximal exact matches do. Reads with no window supported by two seeds (errors in most
        of them) are seeded once more, as bowtie2 re-seeds: shorter seeds, shifted by half an
        interval, and their windows made anew from every round's hits, so a true place found by
        one first-round seed gains the new seeds' support. ``joined``: see extract_seeds."""
        options = self.options
        lengths = np.diff(read_offsets)
        on_device = self._windows_on_device(lengths)
        joined = np.concatenate((codes, reverse_codes)) if joined is None else joined
        sent = self._send(joined, on_device)
        half_interval = options.seed_interval(lengths) // 2
        hits, crowded = self._round(extract_seeds(codes, reverse_codes, read_offsets, options, joined=joined), len(lengths), 0, on_device, sent)
        rounds = [hits]  # kept apart: joining the first round's large arrays cost a tenth of the host time
        if options.long_seed_length and crowded.any():
            long_seeds = extract_seeds(codes, reverse_codes, read_offsets, options, options.long_seed_length, half_interval, crowded, joined=joined)
            rounds.append(self._round(long_seeds, len(lengths), 1, on_device, sent)[0])

        def reseeded(weak):  # weak reads: no window seeded at two read positions
            again = extract_seeds(codes, reverse_codes, read_offsets, options, options.reseed_length, half_interval, weak, joined=joined)
            return self._round(again, len(lengths), 2, on_device, sent)[0]

        if on_device:
            # The weak reads' windows made again from all three rounds, in place of their
            # first ones on the device: nothing is joined on the host.
            device_windows = self.device_windows
            device_windows.run(rounds, lengths)
            weak = device_windows.best_support() <= 1
            if options.reseed_length and weak.any():
                device_windows.run(rounds + [reseeded(weak)], lengths, only=weak, fetch=True)
            return device_windows.fetch()
        windows = self._merge_on_host(*_joined(rounds), lengths)
        best_support = np.zeros(len(lengths), dtype=np.int64)
        np.maximum.at(best_support, windows.read, windows.hits)
        weak = best_support <= 1
        if options.reseed_length and weak.any():
            more = reseeded(weak)
            redone = self._merge_on_host(*_joined([_rows(hits, np.flatnonzero(weak[hits[0]])) for hits in rounds] + [more]), lengths)
            kept = ~weak[windows.read]
            combined = [np.concatenate((getattr(windows, name)[kept], getattr(redone, name))) for name in Windows.FIELDS]
            windows = Windows(*(array[_by_read_strand_start(*combined[:3], self.index.total_length)] for array in combined))
        return windows

    def _windows_on_device(self, lengths) -> bool:
        """Whether reads of these lengths get their windows from the device (DeviceWindows.takes)."""
        return self.device_windows is not None and self.device_windows.takes(lengths)

    def _send(self, joined, on_device: bool):
        """The chunk's seed codes on the device once for all its rounds, when hits are made there."""
        return self.searcher.send_codes(joined) if on_device and self._hit_buffers is not None else None

    def _round(self, seeds: Seeds, count: int, slot: int, on_device: bool, sent=None):
        """A round of seeds' hits and crowded reads (see :meth:`_hits`): on the device, in hit
        buffers ``slot``, when hits may stay there (``sent``: the seeds' codes sent already)."""
        if not (on_device and self._hit_buffers is not None):
            return self._hits(seeds, count)
        options = self.options
        overlaps = None
        if len(self.device_blocks) > 1:
            if seeds.seed_length not in self._device_overlap_tables:
                self._device_overlap_tables[seeds.seed_length] = self.searcher.overlap_table(*self._overlap_table(seeds.seed_length))
            overlaps = self._device_overlap_tables[seeds.seed_length]
        return self.searcher.seed_hits(
            self.device_blocks, seeds.codes if sent is None else sent, seeds.read_starts, seeds.seed_first, seeds.within, seeds.seed_length,
            options.max_occurrences, options.positions_per_read, self._hit_buffers[slot], overlaps,
        )

    def rescue_windows(self, codes, reverse_codes, read_offsets, only, joined=None, sent=None) -> Windows:
        """Windows of the reads in the mask ``only`` from seeds every ``rescue_interval`` bases:
        for reads whose best alignment is poor. A read with several errors inside a repeat may
        have its few seeds that single out its own copy fall between the spaced ones, or lose
        its copy's window (one seed) to the family's other copies (several seeds each); dense
        seeds, fewest occurrences first, give its copy the weight (as BWA-MEM re-seeds).
        ``joined``: see extract_seeds; ``sent``: ``joined`` on the device already, on this filter's
        queue (a DeviceArray: the Smith-Waterman stage's copy of the chunk's reads)."""
        lengths = np.diff(read_offsets)
        seeds = extract_seeds(codes, reverse_codes, read_offsets, self.options, only=only, interval=self.options.rescue_interval, joined=joined)
        if self._windows_on_device(lengths):
            hits, _ = self._round(seeds, len(lengths), 0, True, sent)
            self.device_windows.run([hits], lengths, fetch=True)
            return self.device_windows.fetch()
        hits, _ = self._hits(seeds, len(lengths))
        return self._merge_on_host(*hits, lengths)

    def _hits(self, seeds: Seeds, count: int):
        """Located hits of one round of seeds, as (read, reverse, text position, read offset, seed
        length) arrays, and a mask of the reads that had a seed occurring but left unlocated (too repetitive,
        or past the budget). Every choice here depends on the text only, never on how it is
        cut into blocks: a seed's occurrence count is exact (an occurrence inside the overlap of
        two blocks is found in both and counted once), seeds are taken whole, and located
        positions are made unique."""
        options = self.options
        # 1. Exact search of every seed in every block.
        intervals = [self.searcher.search(block, seeds.codes, seeds.offset, seeds.length)[:2] for block in self.device_blocks]
        occurrences = sum((hi.astype(np.int64) - lo for lo, hi in intervals), np.zeros(len(seeds.read), dtype=np.int64))
        occurrences -= self._overlap_occurrences(seeds)
        # 2. The seeds to locate (see choose_seeds).
        chosen, crowded = choose_seeds(occurrences, seeds.read, count, options.max_occurrences, options.positions_per_read)
        # 3. Locate every occurrence of the chosen seeds in every block; diagonals are the text
        # positions of the reads' first bases.
        seed_parts, position_parts = [], []
        for (lo, hi), device_block in zip(intervals, self.device_blocks):
            sizes = hi[chosen].astype(np.int64) - lo[chosen]
            if sizes.any():
                seed_parts.append(np.repeat(chosen, sizes))
                located = self.searcher.locate_intervals(device_block, lo[chosen], hi[chosen])
                position_parts.append(located.astype(np.int64) + device_block.block.start)
        if len(seed_parts) > 1:
            # An occurrence in the overlap of two blocks is located in both: one int64 key per
            # (seed, position), far faster to make unique than rows of pairs.
            span = self.index.total_length + 1
            keys = unique(np.concatenate(seed_parts) * span + np.concatenate(position_parts))
            hit_seed, positions = np.divmod(keys, span)
        elif seed_parts:  # one block: every located row is a different position already
            hit_seed, positions = seed_parts[0], position_parts[0]
        else:
            hit_seed = positions = np.zeros(0, dtype=np.int64)
        return (seeds.read[hit_seed], seeds.reverse[hit_seed], positions, seeds.read_offset[hit_seed], seeds.length[hit_seed]), crowded

    def _overlap_occurrences(self, seeds: Seeds) -> np.ndarray:
        """For each seed, its occurrences lying wholly inside the overlap of two consecutive
        blocks: those are found in both blocks. (Where three blocks share bases, an occurrence in
        all three lies in two overlaps and is subtracted twice: still counted once.) The
        reference of fm_search.cl's subtract_overlaps."""
        if len(self.device_blocks) < 2 or len(seeds.read) == 0:
            return np.zeros(len(seeds.read), dtype=np.int64)
        length = seeds.seed_length
        table_keys, table_counts = self._overlap_table(length)
        if len(table_keys) == 0:
            return np.zeros(len(seeds.read), dtype=np.int64)
        seed_codes = seeds.codes[seeds.offset[:, None] + np.arange(length)]
        keys = pack_codes(seed_codes)
        found = np.searchsorted(table_keys, keys)
        found = np.minimum(found, len(table_keys) - 1)
        hit = (table_keys[found] == keys) & (seed_codes < 4).all(axis=1)
        return np.where(hit, table_counts[found], 0)

    def _overlap_table(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        """The packed keys (sorted, unique, uint64) of the ``length``-mers inside every two
        consecutive blocks' overlap, and how often each occurs there (int64), made once a length."""
        if length not in self._overlap_tables:
            blocks = [device_block.block for device_block in self.device_blocks]
            keys = [
                kmer_keys(self.index.text(after.start, before.start + before.length - after.start), length)
                for before, after in itertools.pairwise(blocks)
            ]
            self._overlap_tables[length] = unique(np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64), return_counts=True)
        return self._overlap_tables[length]

    def _merge_on_host(self, read, reverse, positions, read_offset, seed_length, lengths) -> Windows:
        """Hits whose seed lies on the random stand-ins of ambiguous bases, or across contigs,
        are not evidence and are dropped. Of the rest, hits of the same read, strand and contig whose diagonals lie within ``margin`` of each
        other (one alignment, its indels shifting the diagonal) make one window: from the
        smallest diagonal - margin to the largest + read length + margin, clipped to the contig
        (at most read length + 3 margins wide).
        Hits on diagonals further apart make separate windows even where the windows overlap:
        two copies of a tandem repeat then each get their own best score, so the second copy's
        score reaches the MAPQ as the second best instead of hiding in one merged window."""
        index, margin = self.index, self.options.margin
        clean = index.span_is_clean(positions, seed_length)
        read, reverse, positions, read_offset = read[clean], reverse[clean], positions[clean], read_offset[clean]
        diagonal = positions - read_offset
        if len(index.contig_starts) == 1:
            contig = np.zeros(len(positions), dtype=np.int64)
        else:
            contig, _ = index.to_contig(positions)
        # Sorted by read, strand, contig and diagonal through one int64 key where it fits
        # (diagonals are shifted to be non-negative; contigs follow each other in the text).
        shift = int(lengths.max(initial=0))
        span = int(index.total_length) + shift + 1
        keyed = 2 * len(lengths) * span * max(1, len(index.contig_starts)) < 2**62
        if keyed:
            order = np.argsort(((read.astype(np.int64) * 2 + reverse) * len(index.contig_starts) + contig) * span + diagonal + shift)
        else:
            order = lexsort((diagonal, contig, reverse, read))
        read, reverse, contig, diagonal, read_offset = read[order], reverse[order], contig[order], diagonal[order], read_offset[order]
        group = np.zeros(len(read), dtype=np.int64)
        if len(read):
            changed = (np.diff(read) != 0) | (np.diff(reverse) != 0) | (np.diff(contig) != 0)
            group[1:] = np.cumsum(changed)
        # Within a group a hit opens a new window when its diagonal is more than margin past the
        # previous hit's (diagonals sorted, so clusters chain hit to hit). A chain wider than
        # margin (a tandem repeat: copies every few tens of bases) is cut into bins of margin
        # diagonals, each its own window: one alignment's hits, a few bases apart, may fall in
        # two bins, whose windows then both hold it, and best_two counts it once.
        opens = np.ones(len(read), dtype=bool)
        opens[1:] = (group[1:] != group[:-1]) | (np.diff(diagonal) > margin)
        chain = np.cumsum(opens) - 1
        chain_first = np.flatnonzero(opens)
        bin_ = (diagonal - diagonal[chain_first][chain]) // (margin + 1)
        opens[1:] |= bin_[1:] != bin_[:-1]
        first = np.flatnonzero(opens)
        last = np.append(first[1:], len(read))[: len(first)] - 1
        read, reverse, contig = read[first], reverse[first], contig[first]
        contig_start = index.contig_starts[contig]
        start = np.maximum(diagonal[first] - margin, contig_start)
        end = np.minimum(diagonal[last] + lengths[read] + margin, contig_start + index.contig_lengths[contig])
        # A window's weight: the read positions its seeds start at, each counted once (a seed in
        # a microsatellite hits one window at several diagonals; it is still one piece of
        # evidence, as BWA-MEM weighs a chain by the read bases its seeds cover).
        window_of_hit = np.cumsum(opens) - 1
        evidence = unique(window_of_hit * (shift + 1) + read_offset)
        seeds_in_window = np.bincount(evidence // (shift + 1), minlength=len(first))
        windows = Windows(read, reverse, start, end, seeds_in_window)
        return self._keep_best(windows)

    def _keep_best(self, windows: Windows) -> Windows:
        """At most ``windows_per_read`` windows a read, those with most hits, half of them kept
        for each strand first: the best windows_per_read // 2 of each strand, then the best of
        the rest, either strand, up to windows_per_read (ties: forward strand first, then
        leftmost). A read from one copy of a repeat family whose other strand matches many
        copies a little better (more seeds each) keeps its own place among the candidates.
        ``windows`` is sorted by (read, reverse, start)."""
        limit = self.options.windows_per_read
        read = windows.read
        if len(read) == 0:
            return windows
        per_read = np.bincount(read)
        crowded = per_read[read] > limit  # only these reads lose windows: sort just theirs
        if not crowded.any():
            return windows
        many = np.flatnonzero(crowded)
        fewer_hits = 2**31 - 1 - np.minimum(windows.hits, 2**31 - 1)
        # Stable sorts by (read[, strand], most hits first) keep the (strand, start) order of ties.
        strand_key = (read[many] * 2 + windows.reverse[many]) * 2**31 + fewer_hits[many]
        by_strand = many[np.argsort(strand_key, kind="stable")]
        first_pick = by_strand[run_ranks(read[by_strand] * 2 + windows.reverse[by_strand]) < limit // 2]
        picked = np.zeros(len(read), dtype=bool)
        picked[first_pick] = True
        rest = many[~picked[many]]
        rest = rest[np.argsort(read[rest] * 2**31 + fewer_hits[rest], kind="stable")]
        room = limit - np.bincount(read[first_pick], minlength=len(per_read))
        second_pick = rest[run_ranks(read[rest]) < room[read[rest]]]
        keep = np.sort(np.concatenate((np.flatnonzero(~crowded), first_pick, second_pick)))
        return Windows(*(getattr(windows, name)[keep] for name in Windows.FIELDS))


# The kernel counts a window's distinct read offsets in a bit set of the index's longest read
# held by each work-item (private memory): beyond this the host path is used instead.
DEVICE_WINDOWS_LONGEST_READ = 4096
# seed_windows_grouped (GPUs): keys a work-group sorts in local memory (8 bytes each; a power of
# two, since the sort pads to one); a read with more hits is done as seed_windows does it.
GROUP_KEYS = 1024


class DeviceWindows:
    """Owner of ``opencl/align/seed_windows.cl``: :meth:`SeedFilter._merge_on_host` (hits -> windows,
    then the best ``windows_per_read``) run on the device over up to three rounds of hits, each
    either on the device already (:class:`DeviceHits`) or a tuple of host arrays
    (:meth:`SeedFilter._hits`), which is grouped by read and sent. Equal to the reference window
    for window (tests compare them). A work-item a read (``seed_windows``), or on a GPU (or with
    ``grouped``) a work-group a read that sorts its keys in local memory
    (``seed_windows_grouped``; see the kernel's header). :meth:`run` leaves a call's windows on
    the device and brings back their weights only; :meth:`fetch` brings the windows.

    The kernel packs (strand, contig, diagonal, read offset) into one 64-bit sort key and keeps
    text positions in 32 bits: :meth:`fits` says whether an index allows that (a 4 Gbp text with
    thousands of contigs does)."""

    def __init__(self, device, queue, index: FMIndex, options: SeedOptions, grouped: bool | None = None, group_keys: int = GROUP_KEYS):
        import pyopencl as cl

        from bowmap.runtime.devices import ReusedBuffer, make_buffer, make_kernel, work_group_size

        if group_keys < 1 or group_keys & (group_keys - 1):
            raise ValueError(f"group_keys must be a power of two, not {group_keys}")
        self.device = device
        self.queue = queue
        self.limit = options.windows_per_read
        self.longest_read = index.max_read_length
        self.grouped = device.info.is_gpu if grouped is None else grouped
        constants = {**_window_constants(index, options), "GROUP_KEYS": group_keys}
        # DIAGONAL_SPAN exceeds 32 bits for large texts: an unsigned long literal.
        program = device.program("align/seed_windows.cl", tuple(
            f"-D{name}={value}{'ul' if name == 'DIAGONAL_SPAN' else ''}" for name, value in constants.items()
        ))
        self._kernel = make_kernel(program, "seed_windows_grouped" if self.grouped else "seed_windows")
        # Grouped: one wavefront a read (its sort's steps are barriers apart) and its keys' local
        # memory; else two wavefronts of reads.
        self._group = work_group_size(self._kernel, device, wavefronts=1 if self.grouped else 2)
        self._local = (cl.LocalMemory(8 * group_keys), cl.LocalMemory(4 * (2 * self._group + 1))) if self.grouped else ()
        mf = cl.mem_flags
        context = device.context
        flags = mf.READ_ONLY | mf.COPY_HOST_PTR
        contig_starts = np.asarray(index.contig_starts, dtype=np.int64)
        contig_ends = contig_starts + np.asarray(index.contig_lengths, dtype=np.int64)
        self._contig_starts = make_buffer(context, flags, hostbuf=contig_starts.astype(np.uint32))
        self._contig_ends = make_buffer(context, flags, hostbuf=contig_ends.astype(np.uint32))
        holes = np.asarray(index.ambiguous_starts, dtype=np.int64)
        hole_ends = holes + np.asarray(index.ambiguous_lengths, dtype=np.int64)
        # A buffer may not be empty: with no holes the kernel never reads these.
        self._hole_starts = make_buffer(context, flags, hostbuf=np.append(holes, 0).astype(np.uint32))
        self._hole_ends = make_buffer(context, flags, hostbuf=np.append(hole_ends, 0).astype(np.uint32))
        self._sent = [HitBuffers(device) for _ in range(MAX_ROUNDS)]  # host rounds, sent
        self._lengths = ReusedBuffer(context, mf.READ_ONLY)
        self._only = ReusedBuffer(context, mf.READ_ONLY)
        self._scratch = [ReusedBuffer(context, mf.READ_WRITE) for _ in range(4)]
        self._outputs = [ReusedBuffer(context, mf.WRITE_ONLY) for _ in range(4)]
        self._last: tuple | None = None  # the latest run's (counts, meta, start and end buffers)
        self._fetched: tuple | None = None  # its (start, end) where it read them (run's fetch)

    @staticmethod
    def fits(index: FMIndex) -> bool:
        """Whether text positions fit 32 bits and (strand, contig, diagonal, offset) 64."""
        if index is None or index.total_length + index.max_read_length >= 2**32:
            return False
        if index.max_read_length > DEVICE_WINDOWS_LONGEST_READ:
            return False
        constants = _window_constants(index, SeedOptions())
        key_values = 2 * constants["CONTIGS"] * constants["DIAGONAL_SPAN"]
        return key_values << constants["OFFSET_BITS"] <= 2**64

    def takes(self, lengths: np.ndarray) -> bool:
        """Whether reads of these lengths fit the compiled keys: the reader holds reads to the
        index's longest, so only callers that skip it (tests) meet the host path instead."""
        return int(np.max(lengths, initial=0)) <= self.longest_read

    def run(self, rounds: list, lengths, only=None, fetch: bool = False) -> None:
        """The kernel over every read of ``lengths`` and its hits of ``rounds``; reads back the
        windows' count and weights of each read, and only with ``fetch`` the windows themselves
        (in the same synchronisation; else :meth:`fetch` reads them). With ``only`` (a mask of the
        reads), the other reads keep the windows of the latest run."""
        from bowmap.runtime.deferred import DeferredReads

        count = len(lengths)
        lengths = np.asarray(lengths, dtype=np.int64)
        if not self.takes(lengths):
            raise ValueError(f"reads longer than the index's {self.longest_read} bases")
        if not 1 <= len(rounds) <= MAX_ROUNDS:
            raise ValueError(f"1 to {MAX_ROUNDS} rounds of hits, not {len(rounds)}")
        rounds = [hits if isinstance(hits, DeviceHits) else self._send(hits, count, staging) for hits, staging in zip(rounds, self._sent)]
        length_buffer = self._lengths.upload(self.queue, lengths.astype(np.uint32))
        hits = max(1, sum(hits.count for hits in rounds))
        scratch = [self._scratch[0].at_least(8 * hits)] + [staging.at_least(4 * hits) for staging in self._scratch[1:]]
        slots = max(1, count * self.limit)
        outputs = [self._outputs[0].at_least(4 * max(1, count))] + [staging.at_least(4 * slots) for staging in self._outputs[1:]]
        window_count = np.zeros(count, dtype=np.uint32)
        meta = np.zeros(count * self.limit, dtype=np.uint32)
        if only is not None and (len(only) != count or self._last is None or len(self._last[0]) != count):
            raise ValueError("only: a mask of the reads of the latest run")
        if any(isinstance(hits, DeviceHits) and len(hits.first_host) != count + 1 for hits in rounds):
            raise ValueError("a round of hits on the device was made for another number of reads")
        mask = self._only.upload(self.queue, np.ascontiguousarray(only if only is not None else np.ones(1, bool), dtype=np.uint8))
        if count:
            global_size = count * self._group if self.grouped else -(-count // self._group) * self._group
            sources = [buffer for hits in rounds for buffer in (hits.first, hits.positions, hits.tags)]
            sources += sources[:3] * (MAX_ROUNDS - len(rounds))  # not read: any buffers will do
            self._kernel(
                self.queue, (global_size,), (self._group,), *sources, np.uint32(len(rounds)), mask, np.uint32(only is not None), length_buffer,
                self._contig_starts, self._contig_ends, self._hole_starts, self._hole_ends, np.uint32(count), *scratch, *outputs, *self._local,
            )
            reads = DeferredReads(self.queue)
            reads.add(window_count, outputs[0])
            reads.add(meta, outputs[3])
            if fetch:
                start, end = self._ends(count)
                reads.add(start, outputs[1])
                reads.add(end, outputs[2])
            reads.wait()
        self._last = (window_count, meta, outputs[1], outputs[2])
        self._fetched = (start, end) if count and fetch else None

    def best_support(self) -> np.ndarray:
        """The latest run's weight of each read's best window (0: no window)."""
        window_count, meta, _, _ = self._last
        weights = np.where(prefix_mask(window_count, self.limit).reshape(-1), meta & np.uint32(0x3FFFFFFF), 0)
        return weights.reshape(len(window_count), self.limit).max(axis=1, initial=0).astype(np.int64)

    def fetch(self) -> Windows:
        """The latest run's windows."""
        from bowmap.runtime.devices import read_back

        window_count, meta, start_buffer, end_buffer = self._last
        if self._fetched is not None:
            start, end = self._fetched
        else:
            start, end = self._ends(len(window_count))
            if len(window_count):
                read_back(self.queue, start, start_buffer, end, end_buffer)
        kept = np.flatnonzero(prefix_mask(window_count, self.limit).reshape(-1))
        meta = meta[kept]
        return Windows(
            read=kept // self.limit,
            reverse=(meta >> np.uint32(31)).astype(bool),
            start=start[kept].astype(np.int64),
            end=end[kept].astype(np.int64),
            hits=(meta & np.uint32(0x3FFFFFFF)).astype(np.int64),
        )

    def _ends(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Host arrays for the start and end of every window slot of ``count`` reads."""
        return np.zeros(count * self.limit, dtype=np.uint32), np.zeros(count * self.limit, dtype=np.uint32)

    def _send(self, hits: tuple, count: int, staging: HitBuffers) -> DeviceHits:
        """A host round of hits (read, reverse, position, read offset, seed length), grouped
        by read and sent: only the two 32-bit arrays the kernel reads, not five 64-bit ones."""
        read, reverse, positions, read_offset, seed_length = hits
        tag = (
            (np.asarray(read_offset, dtype=np.uint32) << np.uint32(7))
            | (np.asarray(seed_length, dtype=np.uint32) << np.uint32(1))
            | np.asarray(reverse, dtype=np.uint32)
        )
        positions = np.asarray(positions, dtype=np.uint32)
        first = np.zeros(count + 1, dtype=np.uint32)
        np.cumsum(np.bincount(read, minlength=count), out=first[1:])
        if len(read) and (np.diff(read) < 0).any():  # hits of several blocks: by seed, not read
            order = np.argsort(read, kind="stable")
            positions, tag = positions[order], tag[order]
        return DeviceHits(
            staging.first.upload(self.queue, first), staging.positions.upload(self.queue, positions),
            staging.tags.upload(self.queue, tag), len(read), first,
        )


# Rounds of hits the windows kernel takes at once (first, long and re-seeded seeds).
MAX_ROUNDS = 3


def _joined(rounds: list[tuple]) -> tuple:
    """Host rounds of hits as one (the first alone when there is one: nothing copied)."""
    return rounds[0] if len(rounds) == 1 else tuple(np.concatenate(parts) for parts in zip(*rounds))


def _rows(hits: tuple, rows: np.ndarray) -> tuple:
    """The hits (a tuple of :meth:`SeedFilter._hits`'s arrays) at ``rows``: the weak reads' mask
    is gathered once a round, not once an array."""
    return tuple(array.take(rows) for array in hits)


def _by_read_strand_start(read: np.ndarray, reverse: np.ndarray, start: np.ndarray, text_length: int) -> np.ndarray:
    """The order of windows by (read, strand, start), ties kept in place: one stable sort of an
    int64 key where it fits (several times faster than the three-key lexsort it equals)."""
    span = int(text_length) + 1
    if len(read) and 2 * (int(read.max()) + 1) * span < 2**62:
        return np.argsort((read * 2 + reverse) * span + start, kind="stable")
    return lexsort((start, reverse, read))


def _window_constants(index: FMIndex, options: SeedOptions) -> dict:
    """Compile-time constants of seed_windows.cl for ``index`` (see the kernel's header)."""
    longest = max(1, index.max_read_length)
    contigs = max(1, len(index.contig_starts))
    return {
        "MARGIN": options.margin,
        "LIMIT": options.windows_per_read,
        "SHIFT": longest,
        "CONTIGS": contigs,
        "HOLES": len(index.ambiguous_starts),
        "OFFSET_BITS": longest.bit_length(),
        "DIAGONAL_SPAN": index.total_length + longest + 1,
        "MASK_WORDS": -(-longest // 32),
    }
