"""What a new user trips on (issue 30): the index's manifest named as its prefix, mates in two
formats, BAM to a terminal, an empty input, a killed index build."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bowmap.cli import main
from test_cli_outputs import one_line_error, run

DATA = Path(__file__).resolve().parent.parent / "data"
LAMBDA = DATA / "lambda_virus.fa"
READS = DATA / "lambda_reads_100bp.fq.gz"
R1, R2 = DATA / "lambda_pairs_R1.fq.gz", DATA / "lambda_pairs_R2.fq.gz"




@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    prefix = tmp_path_factory.mktemp("index") / "lambda"
    assert main(["-q", "index", str(LAMBDA), str(prefix), "--device-mem", "1G"]) == 0
    return prefix


def test_the_manifests_own_name_is_taken_as_the_prefix(index, capsys):
    """bwa takes ref.fa for its files ref.fa.bwt...: bowmap takes PREFIX.bmi for PREFIX."""
    code, by_prefix, _ = run(capsys, "-q", "align", index, READS, "--devices", "cpu")
    assert code == 0
    code, by_manifest, err = run(capsys, "-q", "align", f"{index}.bmi", READS, "--devices", "cpu")
    assert code == 0 and err == ""
    body = [line for line in by_manifest.splitlines() if not line.startswith("@PG")]
    assert body == [line for line in by_prefix.splitlines() if not line.startswith("@PG")]
    code, out, _ = run(capsys, "inspect", f"{index}.bmi")
    assert code == 0 and out.startswith(f"index\t{index}\t")


def test_a_prefix_ending_in_bmi_is_still_a_prefix(tmp_path, capsys):
    """An index built at PREFIX x.bmi (files x.bmi.bmi, ...) is found at x.bmi as before."""
    prefix = tmp_path / "x.bmi"
    assert main(["-q", "index", str(LAMBDA), str(prefix), "--device-mem", "1G"]) == 0
    code, out, _ = run(capsys, "inspect", prefix)
    assert code == 0 and out.startswith(f"index\t{prefix}\t")


def fasta_of(fastq_gz: Path, path: Path) -> Path:
    lines = gzip.decompress(fastq_gz.read_bytes()).decode().splitlines()
    path.write_text("".join(f">{lines[i][1:]}\n{lines[i + 1]}\n" for i in range(0, len(lines), 4)))
    return path


@pytest.mark.parametrize("which", ["second", "first"])
def test_mates_in_two_formats_are_one_line(index, tmp_path, capsys, which):
    fasta = fasta_of(R2 if which == "second" else R1, tmp_path / "mates.fa")
    pair = (R1, fasta) if which == "second" else (fasta, R2)
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "-q", "align", index, *pair, "-o", out, "--devices", "cpu")
    assert code == 1
    one_line_error(err, str(pair[0]), str(pair[1]), "FASTQ", "FASTA", "one format")
    assert not out.exists() and os.listdir(tmp_path) == ["mates.fa"]


def test_mates_both_fasta_map(index, tmp_path, capsys):
    pair = fasta_of(R1, tmp_path / "r1.fa"), fasta_of(R2, tmp_path / "r2.fa")
    code, out, _ = run(capsys, "-q", "align", index, *pair, "--devices", "cpu")
    records = [line.split("\t") for line in out.splitlines() if not line.startswith("@")]
    assert code == 0 and len(records) == 2000 and all(fields[10] == "*" for fields in records)


def on_a_terminal(*argv) -> tuple[int, bytes, str]:
    """Runs bowmap with standard output on a pseudo-terminal: (exit status, what reached the
    terminal, standard error)."""
    import pty
    import threading

    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "bowmap", *map(str, argv)], stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    received = []

    def drain():
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the slave side closed
                return
            if not data:
                return
            received.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    err = process.stderr.read().decode()
    code = process.wait(120)
    reader.join(10)
    os.close(master)
    return code, b"".join(received), err


def test_bam_is_not_written_to_a_terminal_unless_asked(index):
    code, shown, err = on_a_terminal("-q", "align", index, READS, "-O", "bam", "--devices", "cpu")
    assert code == 1 and shown == b""
    one_line_error(err, "-O bam", "compressed data not written to a terminal", "-o -")
    code, shown, err = on_a_terminal("-q", "align", index, READS, "-O", "bam", "-o", "-", "--devices", "cpu")
    assert code == 0 and err == "" and shown[:4] == b"\x1f\x8b\x08\x04"  # BGZF, as asked
    code, shown, err = on_a_terminal("-q", "align", index, READS, "--upto", "1", "--devices", "cpu")
    assert code == 0 and shown.startswith(b"@HD")  # SAM text is fine on a terminal


@pytest.mark.parametrize("data", [b"", gzip.compress(b"")], ids=["plain", "gzip"])
def test_an_empty_input_maps_to_a_header_with_a_warning(index, tmp_path, capsys, data):
    reads = tmp_path / "empty.fq"
    reads.write_bytes(data)
    out = tmp_path / "out.sam"
    code, _, err = run(capsys, "align", index, reads, "-o", out, "--devices", "cpu")
    assert code == 0
    warnings = [line for line in err.splitlines() if "holds no reads" in line]
    assert len(warnings) == 1 and str(reads) in warnings[0] and "Traceback" not in err
    assert all(line.startswith("@") for line in out.read_text().splitlines())


# ------------------------------------------------------------------------- a killed index build


def test_a_killed_index_build_leaves_quietly_and_the_next_build_clears_up(tmp_path):
    """SIGKILL to `bowmap index` while block workers run: the workers leave with it, printing
    nothing; the next build of the same prefix removes the killed build's temporary folder."""
    import time

    import numpy as np

    from tests.conftest import codes_to_text, random_genome, write_fasta

    rng = np.random.default_rng(8)
    # Eight blocks, two at once: about 3 s on a busy 2-core machine, most of it in the workers.
    fasta = write_fasta(tmp_path / "ref.fa", [(f"c{i}", codes_to_text(random_genome(rng, 4_000_000))) for i in range(3)])
    prefix = tmp_path / "ref"
    command = [sys.executable, "-m", "bowmap", "index", fasta, str(prefix), "--threads", "2", "--device-mem", "2M", "--no-progress"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    workers, deadline = [], time.monotonic() + 60
    while not workers and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        workers = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
    time.sleep(0.7)  # inside their blocks by now
    workers = [int(pid) for pid in subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()]
    assert workers and process.poll() is None, "the build ended before it could be killed: make the reference larger"
    process.kill()
    rest = process.stderr.read()  # ends once every worker, which shares this pipe, has gone
    process.wait(30)
    assert "Traceback" not in rest and "bowmap-index-block" not in rest, rest
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{pid}") and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2] for pid in workers):
        assert time.monotonic() < deadline, "block workers outlived their killed parent"
        time.sleep(0.2)
    left = [name for name in os.listdir(tmp_path) if name.endswith(".bowmap-tmp")]
    assert len(left) == 1 and not (tmp_path / "ref.bmi").exists()
    # Folders that are not an abandoned build of this prefix stay: another prefix's, one without
    # a lock file, one whose lock names another prefix.
    others = [tmp_path / ".ref2.abcdefgh.bowmap-tmp", tmp_path / ".ref.nolock00.bowmap-tmp", tmp_path / ".ref.otherpfx.bowmap-tmp"]
    for folder in others:
        folder.mkdir()
    (others[0] / "build.lock").write_text(str(tmp_path / "ref2"))
    (others[2] / "build.lock").write_text(str(tmp_path / "elsewhere" / "ref"))
    small = write_fasta(tmp_path / "small.fa", [("s", codes_to_text(random_genome(rng, 5000)))])
    assert main(["-q", "index", small, str(prefix)]) == 0
    assert not (tmp_path / left[0]).exists() and all(folder.is_dir() for folder in others)
    assert sorted(name for name in os.listdir(tmp_path) if name.endswith(".bowmap-tmp")) == sorted(folder.name for folder in others)


def test_a_running_builds_folder_is_left_alone(tmp_path):
    import fcntl

    from bowmap.index_builder.build import remove_abandoned_workspaces

    folder = tmp_path / ".ref.running0.bowmap-tmp"
    folder.mkdir()
    lock = folder / "build.lock"
    lock.write_text(str(tmp_path / "ref"))
    with open(lock) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # as a running build holds it (another process: flock locks per open file)
        assert remove_abandoned_workspaces(str(tmp_path / "ref")) == [] and folder.is_dir()
    assert remove_abandoned_workspaces(str(tmp_path / "ref")) == [str(folder)] and not folder.exists()


# ------------------------------------------------------------------------------------- README


def readme_commands() -> list[str]:
    """The commands of the README's set-up: its first two ```sh blocks."""
    text = (DATA.parent / "README.md").read_text()
    blocks = text.split("```sh\n")[1:3]
    return [block.split("```")[0].strip() for block in blocks]


def test_readme_is_short_and_its_commands_hold_with_ci():
    readme = (DATA.parent / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    quick_start, tests = readme_commands()
    # Each works in a new shell: the environment named inside the command.
    assert quick_start.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert tests.startswith(". .venv/bin/activate && ")
    assert "/tmp" not in quick_start and " work/" in quick_start
    assert "/work/" in (DATA.parent / ".gitignore").read_text().split()
    assert tests in (DATA.parent / ".ci" / "run").read_text()
    for link in ("bench/RESULTS.md", "docs/install.md", "docs/usage.md", "docs/workflow.md"):
        assert f"({link})" in readme and (DATA.parent / link).is_file()
