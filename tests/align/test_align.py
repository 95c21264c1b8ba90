"""`bowmap align` end to end on simulated lambda reads: accuracy, invariants, bad input."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pysam
import pytest
from conftest import DEVICE_SPECS

from bowmap.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"
LAMBDA = DATA / "lambda_virus.fa"
READS = DATA / "lambda_reads_100bp.fq.gz"
TRUTH = DATA / "lambda_reads_100bp.truth.tsv"


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def aligned(indexes, tmp_path_factory):
    out = tmp_path_factory.mktemp("aligned") / "out.sam"
    assert main(["-q", "align", str(indexes[0]), str(READS), "-o", str(out), "--devices", "cpu", "--queues-per-device", "2"]) == 0
    return out


def test_reads_map_to_their_true_place(aligned):
    truth = {}
    for line in TRUTH.read_text().splitlines()[1:]:
        name, strand, position, _ = line.split("\t")
        truth[name] = (strand == "-", int(position) - 1)
    correct = total = 0
    with pysam.AlignmentFile(str(aligned)) as sam:
        for read in sam:
            assert not read.is_secondary and not read.is_supplementary
            total += 1
            reverse, position = truth[read.query_name]
            if read.is_mapped and read.is_reverse == reverse and abs(read.reference_start - position) <= 5:
                correct += 1
    assert total == len(truth)
    assert correct / total >= 0.98, correct / total


def test_sam_passes_samtools_and_agrees_with_the_reference(aligned, tmp_path):
    assert pysam.quickcheck(str(aligned)) == ""
    sorted_bam = str(tmp_path / "sorted.bam")
    pysam.sort("-o", sorted_bam, str(aligned))
    pysam.index(sorted_bam)
    assert "2000 + 0 in total" in pysam.flagstat(sorted_bam)
    reference = "".join(line.strip() for line in LAMBDA.read_text().splitlines()[1:]).upper()
    with pysam.AlignmentFile(str(aligned)) as sam:
        header = sam.header.to_dict()
        assert header["HD"]["SO"] == "unsorted" and header["SQ"][0]["LN"] == 48502
        assert header["PG"][0]["ID"] == "bowmap" and "align" in header["PG"][0]["CL"]
        for read in sam:
            if read.is_unmapped:
                continue
            assert read.infer_read_length() == len(read.query_sequence)
            mismatches = sum(
                1 for query, ref in read.get_aligned_pairs(matches_only=True)
                if read.query_sequence[query] != reference[ref]
            )
            gaps = sum(length for op, length in read.cigartuples if op in (1, 2))
            assert read.get_tag("NM") == mismatches + gaps
            assert read.get_reference_sequence().upper() == reference[read.reference_start : read.reference_end]
            assert read.get_tag("AS") >= 30
            assert read.has_tag("XS") and 0 <= read.get_tag("XS") <= read.get_tag("AS")  # XS on every mapped read, as bwa


def test_output_is_identical_whatever_the_threads_processes_queues_and_blocks(indexes, aligned, tmp_path, capsys):
    expected = aligned.read_bytes()
    # Uncompressed FASTQ goes to the workers as byte ranges, which they read and parse.
    plain = tmp_path / "reads.fq"
    plain.write_bytes(gzip.decompress(READS.read_bytes()))
    for name, prefix, reads, extra in (
        ("serial", indexes[0], READS, ["--serial"]),
        ("one-queue", indexes[0], READS, ["--queues-per-device", "1", "--chunk-bases", "7000"]),
        ("many-blocks", indexes[1], READS, ["--queues-per-device", "3", "--chunk-bases", "20000"]),
        ("processes", indexes[0], READS, ["--processes", "3", "--chunk-bases", "7000"]),
        ("processes-blocks", indexes[1], READS, ["-p", "2", "--chunk-bases", "20000"]),
        ("processes-queues", indexes[1], READS, ["-p", "2", "--queues-per-device", "3", "--chunk-bases", "9000"]),
        ("ranges-serial", indexes[0], plain, ["--serial", "--chunk-bases", "3000"]),
        ("ranges-queues", indexes[1], plain, ["--queues-per-device", "3", "--chunk-bases", "5000"]),
        ("ranges-processes", indexes[0], plain, ["-p", "3", "--chunk-bases", "2000"]),
    ):
        out = tmp_path / f"{name}.sam"
        # On the kernel tests' device: with BOWMAP_TEST_DEVICES=gpu the processes' layouts run
        # one owner of the GPU (the GPU machine's PoCL aborts when driven from many threads).
        code, _, err = run(capsys, "-q", "align", prefix, reads, "-o", out, "--devices", DEVICE_SPECS[0], *extra)
        assert code == 0, err
        body = [line for line in out.read_bytes().splitlines() if not line.startswith(b"@PG")]
        assert body == [line for line in expected.splitlines() if not line.startswith(b"@PG")], name


def test_small_first_chunks_give_the_same_sam(indexes, aligned, tmp_path, capsys, monkeypatch):
    """The run's first chunks are small (run.FIRST_CHUNKS_RAMP) so its first records come out
    early: the SAM is byte for byte that of whole chunks only, with threads and with processes,
    from byte ranges of a plain FASTQ file and from a gzipped one; the log says when the first
    chunk was written."""
    import bowmap.align.run as run_module

    expected = [line for line in aligned.read_bytes().splitlines() if not line.startswith(b"@PG")]
    plain = tmp_path / "reads.fq"
    plain.write_bytes(gzip.decompress(READS.read_bytes()))
    for ramp in (0, run_module.FIRST_CHUNKS_RAMP, 12):
        monkeypatch.setattr(run_module, "FIRST_CHUNKS_RAMP", ramp)
        for name, reads, extra in (("threads", READS, []), ("processes", plain, ["-p", "2"])):
            out = tmp_path / f"{name}-{ramp}.sam"
            code, _, err = run(capsys, "align", indexes[0], reads, "-o", out, "--devices", "cpu", "--chunk-bases", "50000", *extra)
            assert code == 0, err
            assert [line for line in out.read_bytes().splitlines() if not line.startswith(b"@PG")] == expected, (name, ramp)
            assert re.search(r"first chunk written after [0-9.]+ s", err), err


def test_many_blocks_make_hits_on_the_device_and_the_same_sam_as_on_the_host(indexes, tmp_path, capsys, monkeypatch):
    """With several index blocks the seeds are searched, chosen and located on the device
    (FMSearch.seed_hits), and the SAM, single and paired, is byte for byte the one made from the
    host's hits (SeedFilter._hits: hits_on_device=False), the reference. On the kernel tests'
    first device (BOWMAP_TEST_DEVICES)."""
    from bowmap.align.seed.filter import SeedFilter

    original = SeedFilter.__init__
    made, outputs = [], {}
    for hits_on_device in (True, False):
        def init(self, *args, hits_on_device=hits_on_device, **kwargs):
            original(self, *args, hits_on_device=hits_on_device, **kwargs)
            made.append((hits_on_device, len(self.device_blocks), self._hit_buffers is not None))

        monkeypatch.setattr(SeedFilter, "__init__", init)
        for name, reads in (("single", [READS]), ("paired", [DATA / "lambda_pairs_R1.fq.gz", DATA / "lambda_pairs_R2.fq.gz"])):
            out = tmp_path / f"{name}-{hits_on_device}.sam"
            code, _, err = run(capsys, "-q", "align", indexes[1], *reads, "-o", out, "--devices", DEVICE_SPECS[0], "-p", "1",
                                "--chunk-bases", "20000")
            assert code == 0, err
            outputs[name, hits_on_device] = [line for line in out.read_bytes().splitlines() if not line.startswith(b"@PG")]
    assert made and all(blocks > 1 and on_device == wanted for wanted, blocks, on_device in made)
    for name in ("single", "paired"):
        assert outputs[name, True] == outputs[name, False], name
        assert len(outputs[name, True]) > 1000


def test_bam_output_and_read_groups(indexes, tmp_path, capsys):
    out = tmp_path / "out.bam"
    code, _, err = run(capsys, "-q", "align", indexes[0], READS, "-o", out, "--rg-id", "lane1", "--rg", "SM:lambda", "--no-unal")
    assert code == 0, err
    with pysam.AlignmentFile(str(out), "rb") as bam:
        assert bam.header.to_dict()["RG"] == [{"ID": "lane1", "SM": "lambda"}]
        reads = list(bam)
    assert reads and all(read.get_tag("RG") == "lane1" and read.is_mapped for read in reads)


def test_stdout_and_fasta_input(indexes, tmp_path, capsys):
    fasta = tmp_path / "reads.fa"
    with gzip.open(READS, "rt") as handle:
        lines = handle.read().splitlines()
    fasta.write_text("".join(f">{lines[i][1:]}\n{lines[i + 1]}\n" for i in range(0, 400, 4)))
    code, out, err = run(capsys, "align", indexes[0], fasta)
    assert code == 0, err
    records = [line.split("\t") for line in out.splitlines() if not line.startswith("@")]
    assert len(records) == 100 and all(record[10] == "*" for record in records)
    assert "100 reads" in err and "mapped" in err


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "content, needle",
    [
        ("@r1\nACGT\nIIII\n@r2\nACGT\n+\nIIII\n", ":3:"),
        ("@r1\nACGT\n+\nIII\n", ":4:"),
        ("@r1\nACGT\n+\nIIII\n@r2\nACG", ":5:"),
        ("".join(f"@r{i}\nACGT\n+\nIIII\n" for i in range(30)) + "@bad\nACGT\n+\nIII\n", ":124:"),
    ],
)
@pytest.mark.parametrize("processes", ["1", "2"])
def test_malformed_fastq_fails_cleanly(indexes, tmp_path, capsys, content, needle, processes):
    reads = write(tmp_path / "bad.fq", content)
    out = tmp_path / "out.sam"
    # Small chunks: a byte range of the file far from its start fails in a worker.
    code, _, err = run(capsys, "align", indexes[0], reads, "-o", out, "--devices", "cpu", "-p", processes, "--chunk-bases", "20")
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[-1].startswith("bowmap: error: ") and str(reads) + needle in lines[-1] and "Traceback" not in err
    assert not out.exists() and os.listdir(tmp_path) == ["bad.fq"]


def test_empty_reads_give_a_header_only(indexes, tmp_path, capsys):
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", indexes[0], write(tmp_path / "empty.fq", ""), "-o", out)
    assert code == 0, err
    text = out.read_text()
    assert text.startswith("@HD") and all(line.startswith("@") for line in text.splitlines())


def test_short_and_ambiguous_reads_are_unmapped(indexes, tmp_path, capsys):
    reads = write(tmp_path / "odd.fq", "@short\nACGTAC\n+\nIIIIII\n@allN\n" + "N" * 50 + "\n+\n" + "I" * 50 + "\n@empty\n\n+\n\n")
    code, out, err = run(capsys, "align", indexes[0], reads)
    assert code == 0, err
    flags = [int(line.split("\t")[1]) for line in out.splitlines() if not line.startswith("@")]
    assert flags == [4, 4, 4]


def test_missing_index_and_unwritable_output_fail_before_any_work(indexes, tmp_path, capsys):
    code, _, err = run(capsys, "align", tmp_path / "absent", READS)
    assert code == 1 and "no bowmap index" in err
    code, _, err = run(capsys, "align", indexes[0], READS, "-o", tmp_path / "no" / "such" / "out.sam")
    assert code == 1 and "out.sam" in err and "Traceback" not in err


def test_a_failing_worker_stops_the_run_and_leaves_no_output(indexes, tmp_path, capsys, monkeypatch):
    from bowmap.align import workers

    def fail(*args, **kwargs):
        raise RuntimeError("simulated kernel failure")

    monkeypatch.setattr(workers, "extend_chunk", fail)
    out = tmp_path / "out.sam"
    # One process on the CPU device: the failure patched into this process is the run's (with
    # GPUs the default is worker processes, which this patch does not reach; see below).
    with pytest.raises(RuntimeError, match="simulated kernel failure"):
        main(["-q", "align", str(indexes[0]), str(READS), "-o", str(out), "--chunk-bases", "5000", "--devices", "cpu", "-p", "1"])
    assert not out.exists() and os.listdir(tmp_path) == []


def test_a_failure_inside_a_worker_process_stops_the_run_and_leaves_no_output(indexes, tmp_path, monkeypatch):
    """The fault is injected into the spawned worker processes (the aligner's own starter, its
    extend stage failing: tests/process_workers.FailingAligner), not into this process."""
    import process_workers

    from bowmap.align import run as align_run

    real = align_run.ProcessWorker
    monkeypatch.setattr(align_run, "ProcessWorker", lambda *args, **kwargs: process_workers.FailingAligner(real(*args, **kwargs)))
    out = tmp_path / "out.sam"
    with pytest.raises(RuntimeError, match=r"simulated kernel failure in process (\d+)") as caught:
        main(["-q", "align", str(indexes[0]), str(READS), "-o", str(out), "--chunk-bases", "5000", "--devices", "cpu", "-p", "2"])
    failed_in = int(re.search(r"simulated kernel failure in process (\d+)", str(caught.value)).group(1))
    assert failed_in != os.getpid()  # it really was a worker process
    assert not out.exists() and os.listdir(tmp_path) == []
    # The other worker was ended too: forked, it had this process's SIGTERM handler (bowmap.cli's)
    import multiprocessing

    assert not multiprocessing.active_children()


@pytest.mark.parametrize("option", [["--mismatch", "0"], ["--match", "2000"], ["--gap-open", "0", "--gap-extend", "0"]])
def test_bad_scoring_is_a_usage_error(indexes, tmp_path, capsys, option):
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", indexes[0], READS, "-o", out, *option)
    assert code == 2 and err.startswith("bowmap: error: ") and "Traceback" not in err
    assert not out.exists()


def test_repeats_map_the_same_whatever_the_index_blocks(tmp_path, capsys):
    """A repeat split over blocks, or lying in their overlaps, must not change any choice."""
    rng = np.random.default_rng(17)
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)
    element = rng.integers(0, 4, 400)
    pieces = []
    for copy in range(40):
        pieces.append(rng.integers(0, 4, int(rng.integers(200, 1500))))
        mutated = element.copy()
        if copy % 3:
            flips = rng.random(400) < 0.01
            mutated[flips] = (mutated[flips] + 1) % 4
        pieces.append(mutated)
    genome = np.concatenate(pieces)
    half = len(genome) // 2
    reference = tmp_path / "rep.fa"
    reference.write_text(
        f">a\n{bases[genome[:half]].tobytes().decode()}\n>b\n{bases[genome[half:]].tobytes().decode()}{'N' * 100}\n"
    )
    starts = rng.integers(0, len(genome) - 100, 1500)
    reads = genome[starts[:, None] + np.arange(100)]
    errors = rng.random(reads.shape) < 0.02
    reads[errors] = (reads[errors] + 1) % 4
    reverse = rng.random(len(reads)) < 0.5
    reads[reverse] = 3 - reads[reverse][:, ::-1]
    fastq = tmp_path / "rep.fq"
    fastq.write_text("".join(f"@r{i}\n{bases[read].tobytes().decode()}\n+\n{'I' * 100}\n" for i, read in enumerate(reads)))
    outputs = []
    for name, memory in (("one", "1G"), ("many", "12K")):
        prefix = tmp_path / name
        assert main(["-q", "index", str(reference), str(prefix), "--device-mem", memory, "--max-read-length", "150"]) == 0
        out = tmp_path / f"{name}.sam"
        code, _, err = run(capsys, "-q", "align", prefix, fastq, "-o", out, "--devices", "cpu")
        assert code == 0, err
        outputs.append([line for line in out.read_bytes().splitlines() if not line.startswith(b"@PG")])
    assert len(json.loads((tmp_path / "many.bmi").read_text())["blocks"]) >= 4
    assert outputs[0] == outputs[1]


def align_one_read(tmp_path, capsys, genome, read, *arguments):
    """Index ``genome`` (codes 0..3, one contig ``t``), align ``read`` against it on the CPU
    device with ``arguments`` added, and return its SAM line's fields and tags."""
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)
    reference = tmp_path / "one.fa"
    reference.write_text(f">t\n{bases[genome].tobytes().decode()}\n")
    fastq = write(tmp_path / "one.fq", f"@r\n{bases[read].tobytes().decode()}\n+\n{'I' * len(read)}\n")
    if not (tmp_path / "one.bmi").exists():
        assert main(["-q", "index", str(reference), str(tmp_path / "one")]) == 0
    code, out, err = run(capsys, "align", tmp_path / "one", fastq, "--devices", "cpu", *arguments)
    assert code == 0, err
    fields = next(line for line in out.splitlines() if not line.startswith("@")).split("\t")
    return fields, dict(field.split(":", 1) for field in fields[11:])


@pytest.mark.parametrize("unit", [40, 61, 300])
def test_a_read_inside_a_tandem_repeat_gets_its_second_copy_as_second_best(tmp_path, capsys, unit):
    """Copies a unit apart: each copy is its own candidate, so XS equals AS and MAPQ is 0
    (windows merged over the array used to hide the second copy: XS low, MAPQ 60)."""
    rng = np.random.default_rng(unit)
    size = 2 * unit + 150  # every read of 120 bases from the array's start has a copy a unit on
    array = np.tile(rng.integers(0, 4, unit), -(-size // unit))[:size]
    genome = np.concatenate((rng.integers(0, 4, 3000), array, rng.integers(0, 4, 3000)))
    fields, tags = align_one_read(tmp_path, capsys, genome, genome[3000 + 20 : 3000 + 20 + 120])
    assert tags["AS"] == "i:120" and tags["XS"] == "i:120" and fields[4] == "0", fields[:6] + fields[11:]


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_corrupted_index_stops_the_run_before_any_output(tmp_path, capsys, processes):
    prefix = tmp_path / "lambda"
    assert main(["-q", "index", str(LAMBDA), str(prefix)]) == 0
    occ = next(tmp_path.glob("lambda.0.occ"))
    data = bytearray(occ.read_bytes())
    data[len(data) // 2] ^= 0x10
    occ.write_bytes(bytes(data))
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", prefix, READS, "-o", out, "--devices", "cpu", "-p", processes)
    assert code == 1 and "corrupted" in err.strip().splitlines()[-1] and "Traceback" not in err
    assert not out.exists()
    code, stdout, err = run(capsys, "align", prefix, READS, "--devices", "cpu", "-p", processes)
    assert code == 1 and "corrupted" in err and stdout == ""


def test_an_index_rebuilt_at_the_prefix_during_a_run_stops_the_worker_processes(tmp_path, capsys, monkeypatch):
    """The parent loads and checks one index; if the prefix is rebuilt (here: the reverse
    complement, same length) before the workers map it, they must refuse the new files, not
    write records of one genome under a header naming another."""
    import itertools

    from bowmap.align import runners

    prefix = tmp_path / "lambda"
    assert main(["-q", "index", str(LAMBDA), str(prefix)]) == 0
    sequence = "".join(line.strip() for line in LAMBDA.read_text().splitlines() if not line.startswith(">"))
    reverse = sequence[::-1].translate(str.maketrans("ACGTacgt", "TGCAtgca"))
    (tmp_path / "rc.fa").write_text(">lambda_rc\n" + reverse + "\n")
    real = runners.run_processes

    def rebuild_then_run(chunks, *args, **kwargs):
        first = next(chunks)  # the parent has loaded and checked the index once a chunk is out
        assert main(["-q", "index", str(tmp_path / "rc.fa"), str(prefix)]) == 0
        return real(itertools.chain([first], chunks), *args, **kwargs)

    monkeypatch.setattr(runners, "run_processes", rebuild_then_run)
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", prefix, READS, "-o", out, "--devices", "cpu", "-p", "2", "--chunk-bases", "50000")
    assert code == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(f"bowmap: error: {prefix}.pac: index file changed since this run checked")
    assert not out.exists()


def test_default_processes_follow_cores_and_device_memory(monkeypatch):
    from types import SimpleNamespace

    from bowmap.align import workers as align

    monkeypatch.setattr(align.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    gpu = SimpleNamespace(is_gpu=True, global_memory=80 << 30)
    cpu = SimpleNamespace(is_gpu=False, global_memory=64 << 30)
    assert align.default_processes([cpu]) == 1
    assert align.default_processes([gpu], 1 << 30) == 15  # one core kept for reading and writing
    assert align.default_processes([gpu], 15 << 30) == 5  # 80 GiB hold five copies of 15 + 1 GiB
    assert align.default_processes([gpu, gpu], 30 << 30) == 4
    assert align.default_processes([gpu], 200 << 30) == 1
    assert align.default_processes([gpu], 1 << 30, chunks=3) == 3  # no worker without a chunk
    assert align.default_processes([gpu], 1 << 30, chunks=40) == 15
    assert align.default_processes([gpu], 1 << 30, chunks=2000) == 22  # a large input: 1.5 a core
    assert align.default_processes([gpu], 15 << 30, chunks=2000) == 5
    assert align.default_processes([gpu], 15 << 30, chunks=8) == 5
    assert align.default_processes([cpu], chunks=8) == 1
    # Queue pairs a process: two alone, one beside others, more where device memory held the
    # processes below the cores' 15 (at most four).
    assert align.default_queue_pairs([cpu], 1) == 2
    assert align.default_queue_pairs([gpu], 15) == 1
    assert align.default_queue_pairs([gpu], 5) == 3
    assert align.default_queue_pairs([gpu], 3) == 4 and align.default_queue_pairs([gpu], 1) == 4
    assert align.default_queue_pairs([gpu], 3, chosen=False) == 1  # -p 3 asked for
    assert align.default_queue_pairs([gpu], 1, chosen=False) == 2
    assert align.default_queue_pairs([gpu], 3, chunks=6) == 2  # six chunks: two a process


def test_processes_asked_for_are_capped_by_the_cores_and_the_chunks(indexes, tmp_path, capsys, monkeypatch):
    """`-p 1000` for a small input started 1000 worker processes."""
    from bowmap.align import workers as align

    monkeypatch.setattr(align.os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    assert align.capped_processes(1000, None) == 8  # two a core
    assert align.capped_processes(1000, 3) == 3  # one a chunk
    assert align.capped_processes(5, 40) == 5 and align.capped_processes(1, None) == 1
    plain = tmp_path / "reads.fq"
    plain.write_bytes(b"".join(gzip.decompress(READS.read_bytes()).splitlines(keepends=True)[: 4 * 130]))  # 2 chunks of 10,000 bases
    code, _, err = run(capsys, "align", indexes[0], plain, "-o", tmp_path / "out.sam", "--devices", "cpu", "-p", "1000",
                       "--chunk-bases", "10000")
    assert code == 0, err
    # 2 chunks of 10,000 bases, and up to 4 more: the smaller first chunks (run.FIRST_CHUNKS_RAMP)
    assert "-p 1000: 6 worker process(es), at most 2 a CPU core and one a chunk of the input (at most 6)" in err


def test_a_small_paired_input_counts_its_smaller_first_chunks_when_processes_are_capped(indexes, tmp_path, capsys, monkeypatch):
    """Pairs are capped as single reads are: at the input's chunks and the ramp's smaller first
    chunks, so that a small paired input is shared by several workers beside one owner (pairs
    once left the ramp out and mapped 10,000 chr20 pairs in one process)."""
    from bowmap.align import run as run_module
    from bowmap.align import workers as align
    from bowmap.align.reads import chunk_bound

    monkeypatch.setattr(align.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    mates = []
    for name in ("lambda_pairs_R1.fq.gz", "lambda_pairs_R2.fq.gz"):
        mates.append(tmp_path / name.replace(".gz", ""))
        mates[-1].write_bytes(b"".join(gzip.decompress((DATA / name).read_bytes()).splitlines(keepends=True)[: 4 * 40]))
    expected = chunk_bound(str(mates[0]), 20000 // 2) + run_module.FIRST_CHUNKS_RAMP
    code, _, err = run(capsys, "align", indexes[0], *mates, "-o", tmp_path / "out.sam", "--devices", "cpu", "-p", "1000",
                       "--chunk-bases", "20000")
    assert code == 0, err
    assert f"-p 1000: {expected} worker process(es), at most 2 a CPU core and one a chunk of the input (at most {expected})" in err


def test_chunk_bound_never_undercounts_an_uncompressed_input(tmp_path):
    from bowmap.align.reads import chunk_bound, input_chunks

    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 300, 400)
    records = [f"@r{i}\n{'ACGT'[i % 4] * n}\n+\n{'I' * n}\n" for i, n in enumerate(lengths)]
    fastq = tmp_path / "reads.fq"
    fastq.write_text("".join(records))
    fasta = tmp_path / "reads.fa"
    fasta.write_text("".join(f">r{i}\n{'ACGT'[i % 4] * n}\n" for i, n in enumerate(lengths)))
    for path in (fastq, fasta):
        for chunk_bases in (1, 100, 5_000, 1 << 22):
            made = sum(1 for _ in input_chunks(str(path), chunk_bases, 300))
            assert made <= chunk_bound(str(path), chunk_bases), (path.name, chunk_bases)
    packed = tmp_path / "reads.fq.gz"
    packed.write_bytes(gzip.compress(fastq.read_bytes()))
    assert chunk_bound(str(packed), 100) is None
    assert chunk_bound("-", 100) is None
    assert chunk_bound(str(tmp_path / "missing.fq"), 100) is None


def test_a_read_without_a_good_window_is_rescued_by_dense_seeds(tmp_path, device):
    """extend_chunk given no windows at all: with the rescuer, dense seeds find the read's place
    (its best alignment, none, counts as poor); without it the read stays unmapped."""
    from conftest import build_test_index, codes_to_text

    from bowmap.align.extend.stage import extend_chunk
    from bowmap.align.options import AlignOptions
    from bowmap.align.reads import ReadChunk
    from bowmap.align.output.reference import ReferenceText
    from bowmap.align.extend.smith_waterman import Scoring
    from bowmap.align.seed.filter import Windows
    from bowmap.align.workers import device_workers

    rng = np.random.default_rng(3)
    genome = rng.integers(0, 4, 20_000).astype(np.uint8)
    index = build_test_index(tmp_path, [("chr", codes_to_text(genome))], max_read_length=150)
    read = genome[7_000:7_100].copy()
    read[[10, 45, 80]] = (read[[10, 45, 80]] + 1) % 4
    chunk = ReadChunk(0, 0, np.frombuffer(b"r", np.uint8), np.array([0, 1]), read, np.array([0, 100]), None)
    options, scoring = AlignOptions(index=str(tmp_path / "ref"), reads="-"), Scoring()
    worker = device_workers(index, ReferenceText.from_index(index), device, 1, options, scoring)[0]
    nothing = Windows(*(np.zeros(0, dtype=dtype) for dtype in (np.int64, bool, np.int64, np.int64, np.int64)))
    alone = extend_chunk(worker.device_text, index, worker.smith_waterman, chunk, nothing, scoring, options)
    assert not alone.mapped[0]
    rescued = extend_chunk(worker.device_text, index, worker.smith_waterman, chunk, nothing, scoring, options, worker.rescue_filter)
    assert rescued.mapped[0] and not rescued.reverse[0]
    assert (rescued.position[0], rescued.score[0]) == (7_000, 100 - 3 * (scoring.match + scoring.mismatch))


def test_best_two_equals_a_plain_reference_with_ties():
    """best_two against the obvious per-read loop: best by score, then smallest tie-breaker,
    forward strand, smaller end, then first; second best among the rest, the copies at the
    best's place (extender.Places.same, written out in tests/align/test_records.py) left out."""
    from bowmap.align.extend.extender import Places, best_two
    from bowmap.align.extend.mapq import NO_SCORE
    from tests.align.test_records import plain_same

    rng = np.random.default_rng(5)
    for count, pairs in ((1, 0), (1, 1), (7, 30), (50, 400), (300, 2000)):
        read = np.sort(rng.integers(0, count, pairs))
        score = rng.integers(-3, 6, pairs).astype(np.int32)  # few values: many ties
        tie_breaker = rng.choice(np.array([0, 5, 2**63 + 1], dtype=np.uint64), pairs)
        reverse = rng.random(pairs) < 0.5
        end = rng.integers(0, 60, pairs)
        read_end = rng.integers(1, 8, pairs)
        best, best_score, second = best_two(read, score, count, tie_breaker, Places.estimated(reverse, score, read_end, end, 1))
        for r in range(count):
            mine = [k for k in range(pairs) if read[k] == r]
            if not mine:
                assert (best[r], best_score[r], second[r]) == (-1, NO_SCORE, NO_SCORE)
                continue
            want = min(mine, key=lambda k: (-int(score[k]), int(tie_breaker[k]), bool(reverse[k]), int(end[k]), k))
            others = [int(score[k]) for k in mine if k != want and not plain_same(reverse, read_end, end, score, k, want)]
            assert (best[r], best_score[r], second[r]) == (want, score[want], max(others, default=NO_SCORE)), (count, r)


@pytest.mark.parametrize("clip_penalty", ["5", "0"])
def test_an_indel_near_a_read_end_is_aligned_through_rather_than_clipped(tmp_path, capsys, clip_penalty):
    """Two 3-base insertions in the first 20 bases: aligned through them the read scores
    144 - 2 x 9 = 126, clipped before them 128. With BWA-MEM's clip penalty (5 an end, the
    default) the read's start is kept and its position is right; clipping for free (0) puts
    the unclipped start 6 bases off, a wrong place at MAPQ 60."""
    rng = np.random.default_rng(20)
    genome = rng.integers(0, 4, 4000)
    insert = np.array([0, 0, 0]) if genome[1010] != 0 else np.array([1, 1, 1])
    read = np.concatenate((genome[1000:1010], insert, genome[1010:1016], 3 - insert, genome[1016:1144]))
    fields, tags = align_one_read(tmp_path, capsys, genome, read, "--clip-penalty", clip_penalty)
    if clip_penalty == "5":
        assert (fields[3], fields[5], tags["AS"]) == ("1001", "10M3I6M3I128M", "i:126"), fields[:6] + fields[11:]
    else:
        assert (fields[3], fields[5], tags["AS"]) == ("1017", "22S128M", "i:128"), fields[:6] + fields[11:]


def test_the_minimum_score_applies_to_the_alignment_not_its_clip_bonus(tmp_path, capsys):
    """26 matching bases, then 14 that match nothing: the alignment scores about 26 (the CIGAR's
    score, AS), below the minimum of 30, though its start bonus (5) carries it over in the
    kernel's choosing score: unmapped, as BWA-MEM's -T applies to the alignment's score."""
    rng = np.random.default_rng(26)
    genome = rng.integers(0, 4, 4000)
    read = np.concatenate((genome[2000:2026], (genome[2026:2040] + 1 + rng.integers(0, 3, 14)) % 4))
    for minimum, flag in (("30", "4"), ("20", "0")):
        fields, _ = align_one_read(tmp_path, capsys, genome, read, "--min-score", minimum)
        assert fields[1] == flag, fields[:6] + fields[11:]


def test_mapq_weighs_the_scores_that_chose_the_alignment(tmp_path, capsys):
    """The read's first 100 bases at one place (100M50S: AS 100, clipped at one end) and its
    bases 30..120 at another (clipped at both ends: 90 less two clip penalties, XS 80). MAPQ
    compares the two as they were chosen, each less its clips' penalties (95 against 80), not
    AS against XS (100 against 80), which overstated the lead of a clipped best hit."""
    from bowmap.align.extend.mapq import mapping_quality
    from bowmap.align.extend.smith_waterman import Scoring

    rng = np.random.default_rng(95)
    read = rng.integers(0, 4, 150)
    genome = np.concatenate((rng.integers(0, 4, 2000), read[:100], rng.integers(0, 4, 2000), read[30:120], rng.integers(0, 4, 2000)))
    fields, tags = align_one_read(tmp_path, capsys, genome, read)
    assert (fields[3], fields[5], tags["AS"], tags["XS"]) == ("2001", "100M50S", "i:100", "i:80"), fields[:6] + fields[11:]
    lengths = np.array([150])
    chosen = int(mapping_quality(np.array([95]), np.array([80]), lengths, Scoring())[0])
    assert chosen != int(mapping_quality(np.array([100]), np.array([80]), lengths, Scoring())[0])
    assert int(fields[4]) == chosen


def test_the_summary_counts_reads_aligned_0_1_and_more_times(indexes, tmp_path, capsys):
    """As bowtie2's summary: unmapped, mapped with no other alignment found, mapped with one."""
    import re

    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", indexes[0], READS, "-o", out, "--devices", "cpu")
    assert code == 0
    found = re.search(r"aligned 0 times: (\d+) \(.*\); exactly 1 time: (\d+) \(.*\); >1 times: (\d+) \(", err)
    assert found, err
    zero, once, several = (int(value) for value in found.groups())
    with pysam.AlignmentFile(str(out)) as sam:
        records = list(sam)
    assert zero + once + several == len(records) == 2000
    assert zero == sum(read.is_unmapped for read in records)
