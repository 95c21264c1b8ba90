"""The options of `bowmap align`, dataclasses built by the CLI; nothing below the CLI reads argv.

Each option's default is written once, in its dataclass's field (the CLI's defaults and help
read them there: bowmap.commands.align.OptionDefault), and the checks across options live in
:meth:`AlignOptions.check`, as minimap2's ``mm_check_opt`` and strobealign's ``verify()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bowmap.align.seed.seeds import SeedOptions
from bowmap.runtime.errors import UsageError


@dataclass
class RecordOptions:
    """What `bowmap align` writes beyond each read's primary record (CLI: --max-alternatives,
    --secondary, --no-supplementary, --split-as-secondary)."""

    max_alternatives: int = 5  # XA when at most this many alternatives (bwa's -h); 0: no XA
    secondary: int = 0  # secondary records a read, in place of XA (bwa's -a, minimap2's -N)
    supplementary: bool = True  # split reads: a supplementary record and SA
    split_as_secondary: bool = False  # the supplementary marked 0x100 (bwa's -M, for Picard)
    hard_clip_supplementary: bool = False  # the supplementary's clips as H (bwa's default; its -Y keeps S)


@dataclass
class AlignOptions:
    """Everything `bowmap align` needs; built by the CLI."""

    index: str
    reads: str
    mates: str | None = None  # R2 file of paired-end reads (reads is R1)
    interleaved: bool = False  # reads holds R1, R2, R1, R2, ...
    insert_size: object = None  # bowmap.align.extend.pairs.InsertModel given by --insert-size; None: estimated
    unpaired_penalty: int = 17  # bwa's -U
    output: str | None = None  # None or "-": stdout; *.bam: BAM
    output_format: str | None = None  # "sam" or "bam"; None: from the output's name
    devices: str | None = None
    queues_per_device: int | None = None  # None: 2 with one process, 1 a worker process
    processes: int | None = None  # worker processes; None: see default_processes
    end_to_end: bool = False
    seed: SeedOptions = field(default_factory=SeedOptions)
    records: RecordOptions = field(default_factory=RecordOptions)  # XA, secondary and supplementary records
    scoring: object = None  # bowmap.align.extend.smith_waterman.Scoring; None: its defaults
    min_score: int | None = None  # None: see minimum_scores
    write_unaligned: bool = True
    read_group: tuple[str, list[str]] | None = None
    chunk_bases: int | None = None  # None: 4 Mi, more when blocks are streamed (see seed.residency.plan_memory)
    device_memory: int | None = None  # bytes bowmap may use of each device (--device-mem); None: all of it
    skip: int = 0  # records (pairs for paired input) left out at the start: --skip
    upto: int | None = None  # records mapped after those skipped; None: to the end (--upto)
    serial: bool = False  # debugging: no threads, one device queue
    progress: bool = False
    command_line: str = ""

    def check(self) -> None:
        """Options that do not go together: a one-line UsageError naming them."""
        if self.interleaved and self.mates is not None:
            raise UsageError("--interleaved takes one READS file holding both mates, not two files")
        if self.insert_size is not None and not self.paired:
            raise UsageError("--insert-size is for paired-end reads (READS2 or --interleaved)")

    @property
    def paired(self) -> bool:
        return self.mates is not None or self.interleaved

    @property
    def windowed(self) -> bool:
        """Only part of the input is mapped (--skip / --upto)."""
        return self.skip > 0 or self.upto is not None
