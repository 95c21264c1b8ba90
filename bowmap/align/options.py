"""The options of `bowmap align`, one dataclass built by the CLI; nothing below the CLI reads argv.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bowmap.align.seeds import SeedOptions


@dataclass
class AlignOptions:
    """Everything `bowmap align` needs; built by the CLI."""

    index: str
    reads: str
    mates: str | None = None  # R2 file of paired-end reads (reads is R1)
    interleaved: bool = False  # reads holds R1, R2, R1, R2, ...
    insert_size: object = None  # bowmap.align.pairs.InsertModel given by --insert-size; None: estimated
    unpaired_penalty: int = 17  # bwa's -U
    output: str | None = None  # None or "-": stdout; *.bam: BAM
    output_format: str | None = None  # "sam" or "bam"; None: from the output's name
    devices: str | None = None
    queues_per_device: int | None = None  # None: 2 with one process, 1 a worker process
    processes: int | None = None  # worker processes; None: see default_processes
    end_to_end: bool = False
    seed: SeedOptions = field(default_factory=SeedOptions)
    scoring: object = None  # bowmap.align.smith_waterman.Scoring; None: its defaults
    min_score: int | None = None  # None: see minimum_scores
    write_unaligned: bool = True
    read_group: tuple[str, list[str]] | None = None
    chunk_bases: int = 4 << 20
    skip: int = 0  # records (pairs for paired input) left out at the start: --skip
    upto: int | None = None  # records mapped after those skipped; None: to the end (--upto)
    serial: bool = False  # debugging: no threads, one device queue
    progress: bool = False
    command_line: str = ""

    @property
    def paired(self) -> bool:
        return self.mates is not None or self.interleaved

    @property
    def windowed(self) -> bool:
        """Only part of the input is mapped (--skip / --upto)."""
        return self.skip > 0 or self.upto is not None
