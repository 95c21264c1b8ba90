"""workflow/Snakefile with Snakemake's local executor on the CPU device: the lambda pairs in four
parts merge into the records of one `bowmap align` sorted the same way, whatever the part size;
failing parts end with bowmap's one-line error and no part BAM; a second run redoes only
what is missing. Skipped where Snakemake is not installed (`pip install -e '.[workflow]'`)."""

from __future__ import annotations

import gzip
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("snakemake")
import pysam  # noqa: E402

from bowmap.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SNAKEFILE = ROOT / "workflow" / "Snakefile"
DATA = ROOT / "data"
R1, R2 = DATA / "lambda_pairs_R1.fq.gz", DATA / "lambda_pairs_R2.fq.gz"  # 1,000 pairs


def write_config(folder: Path, shard_pairs: int, r1=R1, r2=R2) -> Path:
    config = folder / "config.yaml"
    config.write_text(
        f"samples:\n  lambda:\n    r1: {r1}\n    r2: {r2}\n"
        f"reference: {DATA / 'lambda_virus.fa'}\n"
        f"shard_pairs: {shard_pairs}\noutdir: {folder / 'results'}\ndevices: cpu\n"
        "read_group: {PL: ILLUMINA}\n"
        'align_options: "--chunk-bases 20000"\n'
    )
    return config


def snakemake(folder: Path, config: Path, *options) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--configfile", str(config), "--cores", "2", "--resources", "gpu=1", *options]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=600, env=with_bowmap_on_path())


def with_bowmap_on_path() -> dict:
    """The environment with this Python's scripts (bowmap, snakemake) first on PATH: the jobs
    call `bowmap`, and pytest may run without the virtual environment activated."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def records(path: Path) -> list[str]:
    """The BAM's records as SAM text, in file order."""
    with pysam.AlignmentFile(str(path), "rb") as bam:
        return [record.to_string() for record in bam]


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> list[str]:
    """One `bowmap align` of all 1,000 pairs, with the workflow's read group, sorted the way
    the workflow sorts (samtools sort)."""
    folder = tmp_path_factory.mktemp("whole")
    prefix = folder / "lambda"
    assert main(["-q", "index", str(DATA / "lambda_virus.fa"), str(prefix)]) == 0
    sam = folder / "whole.sam"
    argv = ["-q", "align", str(prefix), str(R1), str(R2), "-o", str(sam), "--devices", "cpu", "--no-progress"]
    assert main([*argv, "--rg-id", "lambda", "--rg", "SM:lambda", "--rg", "PL:ILLUMINA"]) == 0
    pysam.sort("-o", str(folder / "whole.bam"), str(sam), catch_stdout=False)
    return records(folder / "whole.bam")


@pytest.mark.parametrize("shard_pairs, parts", [(300, 4), (999, 2)])
def test_the_merged_parts_are_one_run_sorted(tmp_path, whole, shard_pairs, parts):
    config = write_config(tmp_path, shard_pairs)
    dry = snakemake(tmp_path, config, "-n")
    assert dry.returncode == 0, dry.stderr
    assert re.search(rf"^align_part +{parts}$", dry.stdout + dry.stderr, re.MULTILINE)
    done = snakemake(tmp_path, config)
    assert done.returncode == 0, done.stderr
    results = tmp_path / "results"
    assert sorted(os.listdir(results / "parts" / "lambda")) == [f"{part}-of-{parts}.bam" for part in range(parts)]
    merged = results / "lambda.bam"
    assert records(merged) == whole
    header = pysam.AlignmentFile(str(merged), "rb").header.to_dict()
    assert header["HD"]["SO"] == "coordinate"
    assert header["RG"] == [{"ID": "lambda", "SM": "lambda", "PL": "ILLUMINA"}]
    bowmap = [program for program in header["PG"] if program["PN"] == "bowmap"]
    assert len(bowmap) == 1 and "--skip" not in bowmap[0]["CL"] and f"merged from {parts} parts" in bowmap[0]["DS"]
    check_merge_program(header, merged, parts)
    assert (results / "lambda.bam.bai").stat().st_mtime >= merged.stat().st_mtime
    assert (results / "lambda.flagstat").read_text().startswith("2000 + 0 in total")
    with pysam.AlignmentFile(str(merged), "rb") as bam:  # the index works
        assert bam.count(bam.references[0], 1000, 2000) > 0
    again = snakemake(tmp_path, config)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def check_merge_program(header: dict, merged: Path, parts: int) -> None:
    """samtools merge's @PG names the parts and the final BAM, follows bowmap's, and names none
    of the workflow's hidden temporary files."""
    merging = [program for program in header["PG"] if program["ID"] != "bowmap"]
    assert [program["PN"] for program in merging] == ["samtools"] and merging[0]["PP"] == "bowmap"
    words = shlex.split(merging[0]["CL"])
    assert words[:2] == ["samtools", "merge"] and (merged.parents[2] / words[words.index("-o") + 1]).resolve() == merged.resolve()
    assert [Path(word).name for word in words[words.index("-o") + 2 :]] == [f"{part}-of-{parts}.bam" for part in range(parts)]
    assert ".tmp" not in str(header["PG"]) and "header.sam" not in str(header["PG"])


def readme_workflow_command() -> str:
    """The README's command that runs workflow/config.yaml on this machine."""
    lines = [line.strip() for line in (ROOT / "README.md").read_text().splitlines() if "snakemake --configfile workflow/config.yaml --cores" in line]
    assert len(lines) == 1, lines
    return lines[0].split("#")[0].strip()


def test_the_readmes_workflow_command_runs_on_a_fresh_clone(tmp_path):
    """The README's command, in a new shell in a copy of the clone (data/ and workflow/), with
    no --config: bowmap's own device choice, the CPU on a machine without a GPU."""
    for name in ("data", "workflow"):
        (tmp_path / name).symlink_to(ROOT / name)
    # The clone's virtual environment: this Python's, whichever it is.
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "activate").write_text(f'export PATH="{Path(sys.executable).parent}:$PATH"\n')
    command = readme_workflow_command()
    assert "--config " not in command and "devices" not in command
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"})
    assert done.returncode == 0, done.stdout + done.stderr
    merged = tmp_path / "work" / "results" / "lambda.bam"
    assert (tmp_path / "work" / "results" / "lambda.flagstat").read_text().startswith("2000 + 0 in total")
    header = pysam.AlignmentFile(str(merged), "rb").header.to_dict()
    check_merge_program(header, merged, 4)
    assert sorted(os.listdir(tmp_path)) == [".snakemake", ".venv", "data", "work", "workflow"]


def test_failed_parts_leave_no_bam_and_a_rerun_redoes_only_them(tmp_path, whole):
    text = gzip.decompress(R2.read_bytes()).decode().splitlines(keepends=True)
    broken = list(text)
    broken[4 * 700] = "@somebody.else/2\n"  # pair 701
    r2 = tmp_path / "R2.fq"
    r2.write_text("".join(broken))
    times = (r2.stat().st_atime, r2.stat().st_mtime)
    config = write_config(tmp_path, 300, r2=r2)
    failed = snakemake(tmp_path, config, "--keep-going")
    # Every part reads pair 701: the insert-size model's sample is the first 25,000 pairs.
    assert failed.returncode != 0
    assert "bowmap: error: " in failed.stderr and "R2.fq:2801: record 701: the mates' names differ" in failed.stderr
    assert "Traceback" not in failed.stderr
    results, parts = tmp_path / "results", tmp_path / "results" / "parts" / "lambda"
    assert not parts.exists() or os.listdir(parts) == []
    assert not (results / "lambda.bam").exists()

    r2.write_text("".join(text))
    os.utime(r2, times)  # the input as it was: parts made from it below stay up to date
    (parts / "2-of-4.bam.part").mkdir(parents=True)  # part 2 cannot write its BAM
    failed = snakemake(tmp_path, config, "--keep-going")
    assert failed.returncode != 0
    assert sorted(os.listdir(parts)) == ["0-of-4.bam", "1-of-4.bam", "2-of-4.bam.part", "3-of-4.bam"]
    assert not (results / "lambda.bam").exists()
    kept = {name: (parts / name).stat().st_mtime_ns for name in os.listdir(parts) if name.endswith(".bam")}
    (parts / "2-of-4.bam.part").rmdir()
    done = snakemake(tmp_path, config)
    assert done.returncode == 0, done.stderr
    for rule, count in [("align_part", 1), ("merge", 1)]:  # Snakemake's count of jobs to run
        assert re.search(rf"^{rule} +{count}$", done.stdout + done.stderr, re.MULTILINE)
    assert {name: (parts / name).stat().st_mtime_ns for name in kept} == kept
    assert records(results / "lambda.bam") == whole


def test_the_example_config_lints_and_lists_its_jobs(tmp_path):
    # Run where the example expects to be, the repository's top folder, but in a copy of it
    # holding only data/: Snakemake writes its .snakemake/ folder where it runs.
    (tmp_path / "data").symlink_to(DATA)
    config = ROOT / "workflow" / "config.yaml"
    found = {}
    for check in ("--lint", "-n"):
        done = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--configfile", str(config), check],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        found[check] = done.stdout + done.stderr
        assert done.returncode == 0, found[check]
    assert "Congratulations, your workflow is in a good condition" in found["--lint"]
    for rule, count in [("index", 1), ("align_part", 4), ("merge", 1)]:
        assert re.search(rf"^{rule} +{count}$", found["-n"], re.MULTILINE), found["-n"]
