"""References and simulated reads of the end-to-end benchmarks (bench/end_to_end.py's docstring
says how they are made): chr20 from Debian's vt-examples or a synthetic genome, reads simulated
with NumPy in batches, their truth, subsets and repeated copies; all cached under the work folder.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness import BenchError, align_accuracy, fm_search, index_build, note, read_json, write_json

VT_FILE = "usr/share/doc/vt/examples/ref/20.fa.gz"
SYNTHETIC = re.compile(r"synthetic_(\d+(?:\.\d+)?)mbp")
SIMULATOR_VERSION = 1  # in every read set's params: change it whenever the simulation changes
SUBSTITUTION, INSERTION, DELETION = 0.008, 0.001, 0.001  # per reference base
MAX_INDEL = 3
WINDOW_PAD = 32  # reference bases drawn beyond the read length, for deletions
BATCH = 50_000
QUALITY = 30
CODES = np.full(256, 4, dtype=np.uint8)  # FASTA letter -> 0..3, 4 for anything else
for _code, _letters in enumerate((b"Aa", b"Cc", b"Gg", b"Tt")):
    CODES[list(_letters)] = _code




@dataclass
class Reference:
    name: str
    folder: Path
    info: dict  # contigs [[name, length]], bases, ambiguous, sha256, source

    @property
    def fasta(self) -> Path:
        return self.folder / "reference.fa"

    @property
    def mbp(self) -> float:
        return self.info["bases"] / 1e6


def read_reference(path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Contig names, contig lengths and the contigs' codes end to end (0..3, 4 for N or IUPAC)."""
    data = path.read_bytes()
    if not data.startswith(b">"):
        raise BenchError(f"{path}: not a FASTA file (no '>' at its start)")
    names, pieces = [], []
    for record in data[1:].split(b"\n>"):  # a loop over contigs
        header, _, body = record.partition(b"\n")
        words = header.split()
        names.append(words[0].decode("ascii", "replace") if words else f"contig{len(names) + 1}")
        pieces.append(CODES[np.frombuffer(body.translate(None, b"\r\n\t "), dtype=np.uint8)])
    del data
    lengths = np.array([len(piece) for piece in pieces], dtype=np.int64)
    return names, lengths, np.concatenate(pieces)


def reference_info(fasta: Path, source: str) -> dict:
    names, lengths, text = read_reference(fasta)
    return {
        "contigs": [[name, int(length)] for name, length in zip(names, lengths)],
        "bases": int(lengths.sum()),
        "ambiguous": int(np.count_nonzero(text == 4)),
        "sha256": index_build.sha256_of(fasta),
        "source": source,
    }


def chr20_source(args) -> tuple[Path, str] | None:
    """The given chr20 source (a .deb or a FASTA) and its description; None if none is given."""
    if args.chr20 is not None:
        if not args.chr20.is_file():
            raise BenchError(f"{args.chr20}: no such file")
        return args.chr20.resolve(), f"--chr20 {args.chr20}"
    if args.vt_deb is not None:
        if not args.vt_deb.is_file():
            raise BenchError(f"{args.vt_deb}: no such file")
        return args.vt_deb.resolve(), f"Debian {args.vt_deb.name} {VT_FILE}"
    return None


def chr20_file(path: Path, folder: Path) -> Path:
    """chr20's FASTA: ``path`` itself, or, for vt-examples' .deb, its 20.fa.gz unpacked into
    ``folder``/deb."""
    if path.suffix != ".deb":
        return path
    if shutil.which("dpkg") is None:
        raise BenchError(f"dpkg not found: unpack {path} elsewhere and pass --chr20 20.fa.gz")
    unpacked = folder / "deb"
    shutil.rmtree(unpacked, ignore_errors=True)
    subprocess.run(["dpkg", "-x", str(path), str(unpacked)], check=True)
    found = unpacked / VT_FILE
    if not found.is_file():
        raise BenchError(f"{path}: holds no {VT_FILE}")
    return found


def prepare_reference(name: str, args, work: Path) -> Reference:
    folder = work / name
    params_path = folder / "params.json"
    params = read_json(params_path)
    fasta = folder / "reference.fa"
    match = SYNTHETIC.fullmatch(name)
    if match:
        length = round(float(match.group(1)) * 1e6)
        key = {
            "reference": name,
            "bases": length,
            "seed": fm_search.GENOME_SEED,
            "genome_version": fm_search.GENOME_VERSION,
        }
    elif name == "chr20":
        source = chr20_source(args)
        if source is None and params and fasta.exists():
            return Reference(name, folder, params["info"])  # prepared by an earlier run
        if source is None and (Path("/") / VT_FILE).is_file():
            source = Path("/") / VT_FILE, f"installed vt-examples {VT_FILE}"
        if source is None:
            raise BenchError("chr20 needs --vt-deb PATH (Debian's vt-examples_*_all.deb) or --chr20 FASTA")
        key = {"reference": name, "source_sha256": index_build.sha256_of(source[0])}
    else:
        raise BenchError(f"unknown reference {name!r}: chr20 or synthetic_<N>mbp")
    if params and params.get("key") == key and fasta.exists():
        return Reference(name, folder, params["info"])

    params_path.unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if match:
        note(f"{name}: making the synthetic genome (bench/fm_search.py make_genome, seed {fm_search.GENOME_SEED})")
        fm_search.write_fasta(fasta, fm_search.make_genome(length, fm_search.GENOME_SEED))
        description = f"synthetic, bench/fm_search.py make_genome({length}, seed {fm_search.GENOME_SEED}) v{fm_search.GENOME_VERSION}"
    else:
        path, description = source
        path = chr20_file(path, folder)
        note(f"chr20: writing {fasta} from {path}")
        with open(path, "rb") as handle:
            opener = gzip.open if handle.read(2) == b"\x1f\x8b" else open
        temporary = fasta.with_name(fasta.name + ".partial")
        with opener(path, "rb") as source_handle, open(temporary, "wb") as target:
            shutil.copyfileobj(source_handle, target, 1 << 22)
        temporary.replace(fasta)
    info = reference_info(fasta, description)
    write_json(params_path, {"key": key, "info": info})
    note(f"{name}: {info['bases']:,} bp in {len(info['contigs'])} contig(s) [{time.perf_counter() - started:.1f} s]")
    return Reference(name, folder, info)


# ---------------------------------------------------------------- reads


def sparse_hits(rng, size: int, rate: float) -> np.ndarray:
    """Distinct positions in [0, size), each hit with probability about ``rate``."""
    return np.unique(rng.integers(0, size, size=rng.binomial(size, rate)))


def draw_starts(
    rng, count, text_length, contig_starts, contig_ends, n_starts, n_ends, window
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` uniform starts of windows inside one contig and free of N: (starts, contigs)."""
    starts, contigs, rounds = [], [], 0
    while sum(map(len, starts)) < count:
        rounds += 1
        if rounds > 1000:
            raise BenchError(f"hardly any window of {window} bases lies inside a contig without N")
        candidates = rng.integers(0, text_length, size=2 * count + 64)
        contig = np.searchsorted(contig_starts, candidates, side="right") - 1
        good = candidates + window <= contig_ends[contig]
        if len(n_starts):
            following = np.searchsorted(n_ends, candidates, side="right")  # first N run ending after it
            clipped = np.minimum(following, len(n_starts) - 1)
            good &= ~((following < len(n_starts)) & (n_starts[clipped] < candidates + window))
        starts.append(candidates[good])
        contigs.append(contig[good])
    return np.concatenate(starts)[:count], np.concatenate(contigs)[:count]


def simulate_batch(rng, text, starts: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Reads of ``length`` from the windows at ``starts`` with substitutions and indels, forward
    strand: (codes uint8 [n, length], usable bool [n]; False when deletions ate the window)."""
    count, window = len(starts), length + WINDOW_PAD
    bases = text[starts[:, None] + np.arange(window)].reshape(-1)  # fancy indexing: a copy
    size = len(bases)
    hits = sparse_hits(rng, size, SUBSTITUTION)
    bases[hits] = (bases[hits] + rng.integers(1, 4, size=len(hits), dtype=np.uint8)) % 4
    inserted = np.zeros(size, dtype=np.int64)
    hits = sparse_hits(rng, size, INSERTION)
    inserted[hits] = rng.integers(1, MAX_INDEL + 1, size=len(hits))
    deletion = np.zeros(size, dtype=np.int8)
    hits = sparse_hits(rng, size, DELETION)
    deletion[hits] = rng.integers(1, MAX_INDEL + 1, size=len(hits))
    inserted.reshape(count, window)[:, 0] = 0  # no indel at a fragment's first base
    deletion.reshape(count, window)[:, 0] = 0
    deletion = deletion.reshape(count, window)
    deleted = np.zeros((count, window), dtype=bool)
    for shift in range(MAX_INDEL):
        deleted[:, shift:] |= deletion[:, : window - shift] > shift
    # Each reference base emits its inserted bases, then itself unless deleted.
    emitted = inserted + ~deleted.reshape(-1)
    owner = np.repeat(np.arange(size), emitted)
    offset = np.arange(len(owner)) - (np.cumsum(emitted) - emitted)[owner]
    tokens = bases[owner]
    is_insert = offset < inserted[owner]
    tokens[is_insert] = rng.integers(0, 4, size=int(is_insert.sum()), dtype=np.uint8)
    per_read = emitted.reshape(count, window).sum(axis=1)
    usable = per_read >= length
    first = np.cumsum(per_read) - per_read
    reads = tokens[np.minimum(first[:, None] + np.arange(length), len(tokens) - 1)]
    return reads, usable


def digit_columns(values: np.ndarray, width: int) -> np.ndarray:
    """ASCII digits of non-negative ``values``, right-aligned and zero-padded to ``width``."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (values[:, None] // powers % 10 + ord("0")).astype(np.uint8)


def joined_rows(pieces: list[tuple[np.ndarray, np.ndarray | None]]) -> bytes:
    """Rows made of byte-matrix pieces side by side; a piece's mask (or None: all) keeps its bytes."""
    matrix = np.concatenate([piece for piece, _ in pieces], axis=1)
    mask = np.concatenate(
        [np.ones(piece.shape, dtype=bool) if keep is None else keep for piece, keep in pieces], axis=1
    )
    return matrix[mask].tobytes()


def constant(count: int, text: bytes) -> np.ndarray:
    return np.broadcast_to(np.frombuffer(text, dtype=np.uint8), (count, len(text)))


@dataclass
class ReadSet:
    reference: Reference
    length: int
    count: int
    subset_count: int
    params: dict
    full: Path
    subset: Path
    truth: Path
    record_bytes: int  # every FASTQ record has the same length
    name_bytes: int  # "@" and the read name
    copies: dict[int, Path] = field(default_factory=dict)  # --repeat-bowmap: K -> file
    _truth: dict | None = None

    def truth_table(self) -> dict:
        if self._truth is None:
            self._truth = align_accuracy.read_truth(self.truth)
        return self._truth


def prepare_reads(reference: Reference, length: int, args) -> ReadSet:
    folder = reference.folder / "reads"
    folder.mkdir(parents=True, exist_ok=True)
    name_prefix = f"sim{length}_".encode()
    width = len(str(args.reads - 1))
    name_bytes = 1 + len(name_prefix) + width
    record_bytes = name_bytes + 1 + length + 3 + length + 1
    params = {
        "reference_sha256": reference.info["sha256"],
        "length": length,
        "reads": args.reads,
        "seed": args.seed,
        "simulator": SIMULATOR_VERSION,
        "errors": {"substitution": SUBSTITUTION, "insertion": INSERTION, "deletion": DELETION, "max_indel": MAX_INDEL},
        "quality": QUALITY,
    }
    full, truth = folder / f"reads_{length}.fq", folder / f"truth_{length}.tsv"
    params_path = folder / f"reads_{length}.params.json"
    if read_json(params_path) != params or not full.exists() or not truth.exists():
        params_path.unlink(missing_ok=True)
        for derived in folder.glob(f"reads_{length}_*.fq"):
            derived.unlink()
        simulate_reads(reference, length, args, full, truth, name_prefix, width)
        write_json(params_path, params)
    if full.stat().st_size != args.reads * record_bytes:
        raise BenchError(f"{full}: {full.stat().st_size} bytes, expected {args.reads} records of {record_bytes}")
    subset = folder / f"reads_{length}_first{args.subset}.fq"
    if not subset.exists():
        with open(full, "rb") as source:
            head = source.read(args.subset * record_bytes)
        temporary = subset.with_name(subset.name + ".partial")
        temporary.write_bytes(head)
        temporary.replace(subset)
    return ReadSet(reference, length, args.reads, args.subset, params, full, subset, truth, record_bytes, name_bytes)


def simulate_reads(
    reference: Reference, length: int, args, full: Path, truth: Path, name_prefix: bytes, width: int
) -> None:
    started = time.perf_counter()
    note(f"{reference.name}: simulating {args.reads:,} reads of {length} bp")
    _, lengths, text = read_reference(reference.fasta)
    contig_starts = np.cumsum(lengths) - lengths
    contig_ends = contig_starts + lengths
    ambiguous = np.concatenate([[False], text == 4, [False]])
    edges = np.flatnonzero(ambiguous[1:] != ambiguous[:-1])
    n_starts, n_ends = edges[0::2], edges[1::2]  # N runs [start, end)
    names = [name.encode() for name, _ in reference.info["contigs"]]
    contig_names = np.zeros((len(names), max(map(len, names))), dtype=np.uint8)
    for number, name in enumerate(names):  # a loop over contigs
        contig_names[number, : len(name)] = np.frombuffer(name, dtype=np.uint8)
    contig_name_lengths = np.array([len(name) for name in names])
    position_width = len(str(int(lengths.max())))
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)

    rng = np.random.default_rng([args.seed, length])
    fastq_partial, truth_partial = full.with_name(full.name + ".partial"), truth.with_name(truth.name + ".partial")
    with open(fastq_partial, "wb") as fastq, open(truth_partial, "wb") as tsv:
        tsv.write(b"read\tstrand\tposition_1based\tcontig\n")
        for first in range(0, args.reads, BATCH):
            count = min(BATCH, args.reads - first)
            reads, starts, contigs = np.empty((0, length), np.uint8), np.empty(0, np.int64), np.empty(0, np.int64)
            while len(reads) < count:  # deletions that eat a whole window's slack: redraw those (rare)
                need = count - len(reads)
                drawn, drawn_contigs = draw_starts(
                    rng, need, len(text), contig_starts, contig_ends, n_starts, n_ends, length + WINDOW_PAD
                )
                simulated, usable = simulate_batch(rng, text, drawn, length)
                reads = np.concatenate([reads, simulated[usable]])
                starts = np.concatenate([starts, drawn[usable]])
                contigs = np.concatenate([contigs, drawn_contigs[usable]])
            reverse = rng.random(count) < 0.5
            reads[reverse] = 3 - reads[reverse, ::-1]
            name = np.concatenate(
                [constant(count, name_prefix), digit_columns(np.arange(first, first + count), width)], axis=1
            )
            fastq.write(
                joined_rows([
                    (constant(count, b"@"), None), (name, None), (constant(count, b"\n"), None),
                    (letters[reads], None), (constant(count, b"\n+\n"), None),
                    (np.full((count, length), 33 + QUALITY, dtype=np.uint8), None), (constant(count, b"\n"), None),
                ])
            )  # fmt: skip
            positions = starts - contig_starts[contigs] + 1
            digits = 1 + (positions[:, None] >= 10 ** np.arange(1, position_width, dtype=np.int64)).sum(axis=1)
            tsv.write(
                joined_rows([
                    (name, None), (constant(count, b"\t"), None),
                    (np.where(reverse, ord("-"), ord("+")).astype(np.uint8)[:, None], None), (constant(count, b"\t"), None),
                    (digit_columns(positions, position_width), np.arange(position_width) >= position_width - digits[:, None]),
                    (constant(count, b"\t"), None),
                    (contig_names[contigs], np.arange(contig_names.shape[1]) < contig_name_lengths[contigs][:, None]),
                    (constant(count, b"\n"), None),
                ])
            )  # fmt: skip
    fastq_partial.replace(full)
    truth_partial.replace(truth)
    note(f"{reference.name}: {args.reads:,} reads of {length} bp written [{time.perf_counter() - started:.1f} s]")


def repeated_reads(read_set: ReadSet, times: int, path: Path | None = None) -> Path:
    """The read set ``times`` over, copy c's reads renamed NAME_c (one NumPy pass a copy), written
    to ``path`` (default reads_{L}_x{times}.fq beside the reads) unless it exists. The suffix goes
    after the first ``name_bytes`` bytes of each record, so a mate's /1 or /2 stays last."""
    path = path or read_set.full.with_name(f"reads_{read_set.length}_x{times}.fq")
    if path.exists():
        return path
    note(f"{read_set.reference.name}: writing {times} x {read_set.count:,} reads of {read_set.length} bp")
    records = np.fromfile(read_set.full, dtype=np.uint8).reshape(read_set.count, read_set.record_bytes)
    width = len(str(times - 1))
    temporary = path.with_name(path.name + ".partial")
    with open(temporary, "wb") as out:
        for copy in range(times):
            suffix = np.frombuffer(f"_{copy:0{width}d}".encode(), dtype=np.uint8)
            renamed = np.empty((read_set.count, read_set.record_bytes + len(suffix)), dtype=np.uint8)
            renamed[:, : read_set.name_bytes] = records[:, : read_set.name_bytes]
            renamed[:, read_set.name_bytes : read_set.name_bytes + len(suffix)] = suffix
            renamed[:, read_set.name_bytes + len(suffix) :] = records[:, read_set.name_bytes :]
            out.write(renamed.tobytes())
    temporary.replace(path)
    return path


# ---------------------------------------------------------------- tools

