"""Motif tables and comparison kernels against the dictionary reference, on PoCL; the CLI."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bowmap.cli import main
from bowmap.modules.motifs import kernels as motifs
from bowmap.modules.motifs import reference

LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)


def planted_regions(rng, count: int, lengths, k: int) -> list[np.ndarray]:
    """Random regions with shared motifs planted (k to k + 3 bases, a few with one substitution),
    a poly-A run, ambiguous bases, and regions shorter than k."""
    low, high = lengths
    regions = [rng.integers(0, 4, size=int(rng.integers(low, high + 1)), dtype=np.uint8) for _ in range(count)]
    motif_set = [rng.integers(0, 4, size=k + int(rng.integers(0, 4)), dtype=np.uint8) for _ in range(3)]
    for region in regions:
        for motif in motif_set:
            if len(region) >= len(motif) and rng.random() < 0.6:
                start = int(rng.integers(0, len(region) - len(motif) + 1))
                region[start : start + len(motif)] = motif
                if rng.random() < 0.5:
                    region[start + int(rng.integers(0, len(motif)))] = rng.integers(0, 4)
        if rng.random() < 0.3:
            region[rng.integers(0, len(region), size=2)] = 4  # ambiguous bases
    if count > 3:
        regions[1] = regions[1][: max(0, k - 1)]  # shorter than k: no k-mer at all
        regions[2][: min(len(regions[2]), 2 * k)] = 0  # a poly-A run: counts above 1
        regions[3][:] = 4 if count > 5 else regions[3]  # all ambiguous
    return regions


def compare_every_kernel(device, regions, options: motifs.TableOptions, cache_bytes=None):
    expected = reference.all_pair_scores(regions, options.k, options.distance)
    tables = motifs.build_tables(*motifs.concatenate_regions(regions), options)
    comparer = motifs.MotifComparer(device, tables)
    for kernel in motifs.KERNELS:
        got = comparer.compare(kernel, cache_bytes=cache_bytes)
        np.testing.assert_array_equal(got, expected, err_msg=kernel)
    got = comparer.compare("thread-to-pair", cache_bytes=cache_bytes, vector_loads=False)
    np.testing.assert_array_equal(got, expected, err_msg="thread-to-pair, scalar loads")
    return tables, expected


@pytest.mark.parametrize(
    "encoding, hash_name, k, count, buckets",
    [
        ("64", "djb2", 8, 33, 7),
        ("64", "universal", 12, 17, 8),
        ("64", "xor", 15, 9, 1),
        ("64", "djb2", 20, 12, 64),
        ("64", "universal", 20, 5, 3),
        ("32", "djb2", 8, 31, 16),
        ("32", "universal", 12, 2, 5),
        ("32", "xor", 12, 15, 8),
        ("32", "xor", 15, 10, 2),
    ],
)
def test_kernels_equal_dictionary_reference(device, encoding, hash_name, k, count, buckets):
    rng = np.random.default_rng(k * 100 + count)
    regions = planted_regions(rng, count, (k - 2, 70), k)
    options = motifs.TableOptions(k=k, distance=1, encoding=encoding, hash=hash_name, buckets=buckets, seed=count)
    _tables, expected = compare_every_kernel(device, regions, options)
    if count > 8:  # the planted motifs are shared exactly and with one substitution
        assert expected[0].max() > 0 and expected[1].max() > expected[0].max()


@pytest.mark.parametrize("cache_keys", [1, 3, 64])
def test_thread_to_pair_with_a_small_cache_streams_chunks(device, cache_keys):
    """A cache smaller than a sub-table, even than one bucket: the merge carries over chunks;
    a hash table smaller than a sub-table: several chunks, each probed by all of j."""
    rng = np.random.default_rng(cache_keys)
    regions = planted_regions(rng, 19, (20, 90), 8)
    for encoding in ("64", "32"):
        options = motifs.TableOptions(k=8, distance=1, encoding=encoding, hash="xor", buckets=2)
        expected = reference.all_pair_scores(regions, 8, 1)
        tables = motifs.build_tables(*motifs.concatenate_regions(regions), options)
        key_bytes = tables.keys.dtype.itemsize
        comparer = motifs.MotifComparer(device, tables)
        for vector_loads in (True, False):
            got = comparer.compare("thread-to-pair", cache_bytes=cache_keys * key_bytes, vector_loads=vector_loads)
            np.testing.assert_array_equal(got, expected)
        # A hash table of 2, 4 or 128 slots: chunks of 1, 2 or 64 keys.
        got = comparer.compare("thread-to-pair-hash", cache_bytes=2 * cache_keys * (key_bytes + 4))
        np.testing.assert_array_equal(got, expected)


def test_distance_two_zero_and_sizes_around_the_work_group(device):
    rng = np.random.default_rng(7)
    regions = planted_regions(rng, 8, (6, 30), 6)
    compare_every_kernel(device, regions, motifs.TableOptions(k=6, distance=2, encoding="32", hash="djb2", buckets=4))
    compare_every_kernel(device, regions, motifs.TableOptions(k=6, distance=0, encoding="64", hash="universal", buckets=4))
    # More regions than a work-group's columns (and not a multiple of it): several column blocks.
    comparer = motifs.MotifComparer(device, motifs.build_tables(*motifs.concatenate_regions(regions), motifs.TableOptions(k=6)))
    kernel = comparer._kernel("thread_to_pair")
    width, _ = comparer._group_size(kernel, 8)
    for count in (1, width - 1, width + 1):
        many = [rng.integers(0, 4, size=int(size), dtype=np.uint8) for size in rng.integers(0, 14, size=count)]
        options = motifs.TableOptions(k=5, distance=1, encoding="32", hash="xor", buckets=1)
        tables = motifs.build_tables(*motifs.concatenate_regions(many), options)
        got = motifs.MotifComparer(device, tables).compare("thread-to-pair")
        np.testing.assert_array_equal(got, reference.all_pair_scores(many, 5, 1))


def test_row_slices_are_parts_of_the_whole(device):
    rng = np.random.default_rng(3)
    regions = planted_regions(rng, 14, (10, 60), 8)
    tables = motifs.build_tables(*motifs.concatenate_regions(regions), motifs.TableOptions(k=8, buckets=3))
    comparer = motifs.MotifComparer(device, tables)
    whole = comparer.compare()
    starts = motifs.row_starts(14)
    for first, last in ((0, 1), (5, 9), (12, 14), (13, 14)):
        for kernel in ("thread-to-pair", "warp-to-bucket"):
            part = comparer.compare(kernel, rows=(first, last))
            np.testing.assert_array_equal(part, whole[:, starts[first] : starts[last]])


@pytest.mark.parametrize("kernel, batches", [("thread-to-pair", 3), ("sequential-bucket", 2), ("auto", 20)])
def test_pipelined_batches_of_configurations_add_up(device, kernel, batches):
    rng = np.random.default_rng(batches)
    regions = planted_regions(rng, 11, (5, 50), 7)
    options = motifs.TableOptions(k=7, distance=2, encoding="64", hash="universal", buckets=3)
    timings = {}
    got = motifs.pipelined_scores(*motifs.concatenate_regions(regions), options, device, kernel, batches, timings=timings)
    np.testing.assert_array_equal(got, reference.all_pair_scores(regions, 7, 2))
    assert timings["kernel"] in motifs.KERNELS and timings["total"] >= timings["build"]


# ---------------------------------------------------------------- tables

def scalar_bucket(key: int, options: motifs.TableOptions) -> int:
    """The hashes written with Python integers, one key at a time."""
    bits = motifs.ENCODINGS[options.encoding][0]
    if options.hash == "djb2":
        value = motifs.DJB2_START
        for position in range(options.k):
            value = (value * 33 + ((key >> (bits * (options.k - 1 - position))) & ((1 << bits) - 1))) & 0xFFFFFFFF
    elif options.hash == "universal":
        a, b = motifs.universal_parameters(options.seed)
        value = (a * key + b) % motifs.MERSENNE_61
    else:
        value = (key ^ (key >> 32)) & 0xFFFFFFFF
        value ^= value >> 16
    return value % options.buckets


def word_of(key: int, configuration, options) -> str:
    bits = motifs.ENCODINGS[options.encoding][0]
    letters = ["ACGT"[(key >> (bits * (options.k - 1 - position))) & ((1 << bits) - 1)] for position in range(options.k)]
    for position in configuration:
        assert letters[position] == "A"  # wildcards are written as the fixed base A
        letters[position] = "*"
    return "".join(letters)


@pytest.mark.parametrize("encoding, hash_name, k", list(itertools.product(("64", "32"), motifs.HASHES, (8, 15))) + [("64", "universal", 20)])
def test_tables_hold_the_reference_counts_in_sorted_hashed_buckets(encoding, hash_name, k):
    rng = np.random.default_rng(k)
    regions = planted_regions(rng, 6, (k - 1, 40), k)
    options = motifs.TableOptions(k=k, distance=1, encoding=encoding, hash=hash_name, buckets=5, seed=11)
    tables = motifs.build_tables(*motifs.concatenate_regions(regions), options)
    assert tables.keys.dtype == motifs.ENCODINGS[encoding][1] and tables.counts.dtype == np.uint32
    configs = motifs.configurations(k, 1)
    assert len(tables.offsets) == len(configs) * len(regions) * options.buckets + 1
    for region, codes in enumerate(regions):
        expected = reference.region_tables(codes, k, 1)
        for index, configuration in enumerate(configs):
            counter = expected[len(configuration)][index - (1 if configuration else 0)]
            start, end = tables.range_of(index, region)
            keys = [int(key) for key in tables.keys[start:end]]
            assert {word_of(key, configuration, options): int(count) for key, count in zip(keys, tables.counts[start:end])} == dict(counter)
            base = (index * len(regions) + region) * options.buckets
            for bucket in range(options.buckets):
                first, last = int(tables.offsets[base + bucket]), int(tables.offsets[base + bucket + 1])
                bucket_keys = [int(key) for key in tables.keys[first:last]]
                assert bucket_keys == sorted(set(bucket_keys))
                assert all(scalar_bucket(key, options) == bucket for key in bucket_keys)


def test_universal_hash_multiplies_modulo_the_mersenne_prime():
    rng = np.random.default_rng(5)
    keys = np.concatenate([rng.integers(0, motifs.MERSENNE_61, size=500, dtype=np.uint64), np.array([0, motifs.MERSENNE_61 - 1], dtype=np.uint64)])
    for seed in range(4):
        a, _ = motifs.universal_parameters(seed)
        got = motifs._mulmod_61(a, keys)
        assert [int(value) for value in got] == [a * int(key) % motifs.MERSENNE_61 for key in keys]


def test_options_are_checked():
    with pytest.raises(ValueError, match="k must be"):
        motifs.TableOptions(k=16, encoding="32").check()
    with pytest.raises(ValueError, match="hash"):
        motifs.TableOptions(hash="md5").check()


# ---------------------------------------------------------------- command line

def write_fasta(path, records):
    path.write_text("".join(f">{name} upstream\n{sequence}\n" for name, sequence in records))
    return path


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_command_writes_edges_and_dense_matrix(tmp_path, capsys):
    rng = np.random.default_rng(9)
    regions = planted_regions(rng, 7, (30, 60), 8)
    regions[3] = np.array([0, 1, 2, 3, 4, 0, 1], dtype=np.uint8)  # FASTA needs a sequence
    records = [(f"gene{index}", LETTERS[codes].tobytes().decode().lower() if index == 2 else LETTERS[codes].tobytes().decode()) for index, codes in enumerate(regions)]
    fasta = write_fasta(tmp_path / "up.fa", records)
    output, dense = tmp_path / "edges.tsv", tmp_path / "weights.npy"
    code, _, err = run(capsys, "motifs", fasta, "-k", 8, "-d", 1, "-o", output, "--dense", dense, "--weights", "1,0.25", "--devices", "cpu")
    assert code == 0, err
    expected = reference.all_pair_scores(regions, 8, 1)
    weights = expected[0] + 0.25 * expected[1]
    lines = output.read_text().splitlines()
    assert lines[0] == "#gene_i\tgene_j\tS_0\tS_1\tweight"
    rows, columns = motifs.pair_indexes(len(regions))
    wanted = [f"gene{i}\tgene{j}\t{s0}\t{s1}\t{w:.10g}" for i, j, s0, s1, w in zip(rows, columns, expected[0], expected[1], weights) if w > 0]
    assert lines[1:] == wanted and len(wanted) > 3
    matrix = np.load(dense)
    assert matrix.shape == (7, 7) and np.allclose(matrix[rows, columns], weights) and np.allclose(matrix, matrix.T)

    code, out, err = run(capsys, "motifs", fasta, "-k", 8, "--min-weight", 20, "--strands", "both", "--kernel", "warp-to-bucket", "--encoding", "64", "--hash", "universal", "--devices", "cpu")
    assert code == 0, err
    both = []
    for codes in regions:
        both += [codes, motifs.reverse_complement(codes)]
    expected = reference.all_pair_scores(both, 8, 1)
    weights = expected[0] + 0.5 * expected[1]
    names = [f"gene{index // 2}:{'+-'[index % 2]}" for index in range(len(both))]
    rows, columns = motifs.pair_indexes(len(both))
    wanted = [f"{names[i]}\t{names[j]}\t{s0}\t{s1}\t{w:.10g}" for i, j, s0, s1, w in zip(rows, columns, expected[0], expected[1], weights) if w > 20]
    assert out.splitlines()[1:] == wanted and wanted


@pytest.mark.parametrize(
    "content, argv, exit_code, needle",
    [
        (">a\nACGTX\n>b\nACGT\n", [], 1, "up.fa:2: invalid character 'X' in record 'a'"),
        (">a\nACGT\n>a\nACGT\n", [], 1, "duplicate record name"),
        (">a\nACGT\n", ["-k", "21"], 2, "-k: 21 is out of range"),
        (">a\nACGT\n", ["-k", "16", "--encoding", "32"], 2, "--encoding 32"),
        (">a\nACGT\n", ["--weights", "1,2,3"], 2, "expected 2 weights"),
        (">a\nACGT\n", ["--weights", "1,x"], 2, "numbers separated by commas"),
        (">a\nACGT\n", ["--buckets", "0"], 2, "--buckets: 0 is out of range"),
    ],
)
def test_bad_input_gives_one_line(tmp_path, capsys, content, argv, exit_code, needle):
    fasta = tmp_path / "up.fa"
    fasta.write_text(content)
    output = tmp_path / "edges.tsv"
    code, _, err = run(capsys, "motifs", fasta, "-o", output, "--devices", "cpu", *argv)
    assert code == exit_code
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert not output.exists() and list(tmp_path.iterdir()) == [fasta]


def test_fastest_kernel_is_a_kernel(device):
    rng = np.random.default_rng(4)
    regions = [rng.integers(0, 4, size=12, dtype=np.uint8) for _ in range(40)]
    tables = motifs.build_tables(*motifs.concatenate_regions(regions), motifs.TableOptions(k=8))
    comparer = motifs.MotifComparer(device, tables)
    assert comparer.fastest_kernel() == "thread-to-pair"  # too few pairs for a trial
    assert comparer.fastest_kernel(sample_pairs=3) in motifs.KERNELS


def forced_size_mismatches(device, sizes, kernels=motifs.KERNELS) -> list[str]:
    """Every kernel of ``kernels`` at each forced work-group size, with the default local cache
    and one of a few keys (chunks), against the reference: the mismatches, as text."""
    wrong = []
    for seed, (count, k, distance, encoding, hash_name, buckets) in enumerate(
        [(7, 8, 1, "32", "djb2", 8), (13, 6, 2, "64", "universal", 3), (40, 5, 1, "32", "xor", 1)]
    ):
        regions = planted_regions(np.random.default_rng(seed), count, (5, 60), k)
        options = motifs.TableOptions(k=k, distance=distance, encoding=encoding, hash=hash_name, buckets=buckets)
        expected = reference.all_pair_scores(regions, k, distance)
        tables = motifs.build_tables(*motifs.concatenate_regions(regions), options)
        for size in sizes:
            comparer = motifs.MotifComparer(device, tables)
            comparer.work_group_size = size
            for kernel in kernels:
                for cache_bytes in (None, 64):
                    got = comparer.compare(kernel, cache_bytes=cache_bytes)
                    if not np.array_equal(got, expected):
                        wrong.append(f"{count} regions, {kernel}, work-group {size}, cache {cache_bytes}: {int((got != expected).sum())} scores differ")
    return wrong


def test_every_kernel_equals_the_reference_whatever_the_work_group_size(device):
    """A kernel must not depend on its work-group size (issue 22, item 13: a wrong S_0 on a
    16-core Xeon's PoCL 5, where the group size and compute units differ from CI's)."""
    import pyopencl as cl

    comparer = motifs.MotifComparer(device, motifs.build_tables(np.zeros(8, np.uint8), [0], [8], motifs.TableOptions(k=4)))
    largest = comparer._kernel("thread_to_pair").get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device.device)
    assert forced_size_mismatches(device, sorted({1, 2, 3, 7, 64, largest})) == []


def pocl_process_mismatches(call: str, env: dict[str, str]) -> str:
    """Runs ``call`` (an expression of this module's functions and ``device``, a list of
    mismatches) on each PoCL CPU device that builds kernels, in a process of its own with ``env``
    added (PoCL reads its settings at start-up or kernel build): the mismatches printed."""
    import os
    import subprocess
    import sys

    from bowmap.runtime.devices import build_problem, list_devices

    pocl = [info.index for info in list_devices() if "Portable" in info.platform and build_problem(info.index) is None]
    if not pocl:
        pytest.skip("no PoCL device")
    script = (
        "import sys; sys.path[:0] = ['tests', 'tests/modules']\n"
        "from test_motifs import *\n"
        "from bowmap.runtime.devices import open_devices\n"
        f"for index in {pocl!r}:\n"
        "    device = open_devices(str(index))[0]\n"
        f"    print(*{call}, sep='\\n')\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", script], check=False, cwd=root, capture_output=True, text=True,
                          timeout=500, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_kernels_hold_under_pocls_serial_work_group_compiler():
    """PoCL's "loops" work-group compiler (POCL_WORK_GROUP_METHOD) lost a work-item's running
    sum carried across barriers: thread-to-pair-hash at work-group size 2 on Debian's PoCL 3.1."""
    call = "forced_size_mismatches(device, (2, 3), ('thread-to-pair', 'thread-to-pair-hash'))"
    assert pocl_process_mismatches(call, {"POCL_WORK_GROUP_METHOD": "loops"}) == ""


def repeated_mismatches(device, repeats: int, width: int = 64) -> list[str]:
    """The thread-to-pair kernels on the 40-region case, ``repeats`` times each at a forced
    work-group size: the runs that differed from the reference, as text."""
    regions = planted_regions(np.random.default_rng(2), 40, (5, 60), 5)
    options = motifs.TableOptions(k=5, distance=1, encoding="32", hash="xor", buckets=1)
    expected = reference.all_pair_scores(regions, 5, 1)
    comparer = motifs.MotifComparer(device, motifs.build_tables(*motifs.concatenate_regions(regions), options))
    comparer.work_group_size = width
    wrong = []
    for kernel in ("thread-to-pair", "thread-to-pair-hash"):
        for run in range(repeats):
            got = comparer.compare(kernel)
            if not np.array_equal(got, expected):
                wrong.append(f"{kernel}, run {run}: {int((got != expected).sum())} scores differ")
    return wrong


def test_scores_hold_when_many_work_groups_run_at_once():
    """Neighbouring work-groups score neighbouring pairs: PoCL's vectorised masked `+=` wrote
    stale sums back over the next group's (CI: 6 scores of 780 lost, one run in ~50). More PoCL
    threads than cores (POCL_MAX_PTHREAD_COUNT) make groups interleave: of 300 runs a kernel,
    4 to 10 lost sums here before add_score (motifs.cl)."""
    assert pocl_process_mismatches("repeated_mismatches(device, 300)", {"POCL_MAX_PTHREAD_COUNT": "64"}) == ""
