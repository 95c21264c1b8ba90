"""bench/human_scale.py: the table and the goals from made-up rows (missing rows say why, the
last row of an id wins), the PSS column and goal, and the pairs' copies keeping each mate's /1 or
/2 last."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.conftest import load_bench


@pytest.fixture(scope="module")
def human_scale():
    return load_bench("human_scale")


def _align_row(row_id, steady, blocks=1, mode="single", proper=None, **more):
    return {**more,
        "id": row_id, "label": row_id.split(":")[0], "mode": mode, "blocks": blocks, "reads": 2_000_000, "copies": 5,
        "repeat": 1, "whole_s": 8.0, "copies_s": 8.0 + 8_000_000 / steady, "whole_reads_s": 250_000.0,
        "steady_reads_s": steady, "peak_rss_kib": 6 * 2**20, "right_pct": 99.7, "wrong_q20": 44, "proper_pct": proper,
        "devices": "NVIDIA H100", "sources": "abc", "machine": None,
    }  # fmt: skip


def _pss(gib, samples=3, at_rss_gib=6.0, fell_back=0):
    return {"peak_pss_kib": int(gib * 2**20), "pss_rss_kib": int(at_rss_gib * 2**20), "pss_samples": samples,
            "pss_sample_s": 0.12, "pss_fell_back": fell_back}  # fmt: skip


def _write(folder: Path, rows: list[dict]) -> None:
    with open(folder / "results.jsonl", "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


def _verdicts(human_scale, folder):
    return {goal: (measured, met) for goal, measured, met in human_scale.goals(human_scale.read_rows(folder))}


def test_goals_pass_fail_and_missing(human_scale, tmp_path):
    rows = [
        {"id": "index:big", "seconds": 421.6, "tree_peak_bytes": int(14.83 * 2**30), "blocks": 2, "bytes": 2**31,
         "predicted_bytes": 0, "threads": 16, "bases": 3_100_000_000},
        _align_row("chr20:one:single", 800_000),
        _align_row("chr20:split:single", 700_000, blocks=4),  # 87.5%: fails
        _align_row("chr20:split:single", 760_000, blocks=4),  # a later row of the same id wins: 95%
        _align_row("big:all:single", 730_000, blocks=2),  # 91.25%: passes
        _align_row("chr20:one:paired", 600_000, mode="paired", proper=99.9),
        _align_row("big:all:paired", 500_000, blocks=2, mode="paired", proper=99.8),  # 83%: fails
        {"id": "big:capped:single", "note": "align has no --device-mem"},
    ]  # fmt: skip
    _write(tmp_path, rows)
    verdicts = _verdicts(human_scale, tmp_path)
    assert verdicts["chr20 split (4 blocks) >= 90% of one-block chr20, steady, single"] == ("95.0%", True)
    assert verdicts["human-like genome (2 blocks) >= 90% of one-block chr20, steady, single"] == ("91.2%", True)
    assert verdicts["human-like genome (2 blocks) >= 90% of one-block chr20, steady, paired"] == ("83.3%", False)
    assert verdicts["chr20 split >= 90% of one-block chr20, steady, paired"] == ("-", None)
    assert verdicts["index build <= 10 min and <= 16 GB"] == ("422 s, 15.92 GB", True)  # 14.83 GiB is 15.92 GB
    assert verdicts["block by block within 2x of all resident, steady, single"] == ("-", None)

    text = human_scale.report(tmp_path)
    lines = text.splitlines()
    assert any("chr20 split" in line and "paired" in line and "not run yet: --stage chr20" in line for line in lines)
    assert any("block by block" in line and "(align has no --device-mem)" in line for line in lines)
    assert any(line.startswith("index build, human-like genome (3.1 Gbp, 16 threads)") and "421.6" in line for line in lines)
    assert "760,000" in text and "700,000" not in text
    assert sum("FAIL" in line for line in lines) == 1 and sum(line.endswith("pass") for line in lines) == 3
    # Full rows line up: the steady column ends at one place in every made row.
    table = [line for line in lines if " 2,000,000 " in line]
    assert len(table) == 5 and len({line.index(" 99.70") for line in table}) == 1


def test_index_over_either_limit_fails(human_scale, tmp_path):
    for seconds, peak in ((601, 10e9), (300, 16.1e9)):
        _write(tmp_path, [{"id": "index:big", "seconds": seconds, "tree_peak_bytes": peak, "blocks": 2, "bytes": 1,
                           "predicted_bytes": 0, "threads": 16, "bases": 3_100_000_000}])  # fmt: skip
        assert _verdicts(human_scale, tmp_path)["index build <= 10 min and <= 16 GB"][1] is False


def test_block_by_block_within_twice(human_scale, tmp_path):
    for capped, met in ((400_000, True), (390_000, False)):
        _write(tmp_path, [_align_row("big:all:single", 800_000, blocks=2), _align_row("big:capped:single", capped, blocks=2)])
        measured, verdict = _verdicts(human_scale, tmp_path)["block by block within 2x of all resident, steady, single"]
        assert verdict is met, measured


def test_empty_report_names_the_stages(human_scale, tmp_path):
    text = human_scale.report(tmp_path)
    for stage in ("index", "chr20", "big"):
        assert f"not run yet: --stage {stage}" in text
    assert "pass" not in text and "FAIL" not in text


def test_pair_copies_keep_the_mate_suffix_last(human_scale, tmp_path):
    end_to_end = human_scale.end_to_end
    records = [f"@pair{n}/1\nACGTA\n+\nIIIII\n".encode() for n in range(3)]
    source = tmp_path / "r1.fq"
    source.write_bytes(b"".join(records))
    reference = end_to_end.Reference("test", tmp_path, {})
    name_bytes = len("@pair0")
    read_set = end_to_end.ReadSet(reference, 5, 3, 1, {"p": 1}, source, source, source, len(records[0]), name_bytes)
    copies = human_scale.copied(read_set, 2, tmp_path / "r1_x2.fq")
    names = copies.read_text().splitlines()[::4]
    assert names == ["@pair0_0/1", "@pair1_0/1", "@pair2_0/1", "@pair0_1/1", "@pair1_1/1", "@pair2_1/1"]
    # Made again when the reads change, kept when they do not.
    assert human_scale.copied(read_set, 2, copies) == copies
    read_set.params = {"p": 2}
    copies.write_text("stale")
    human_scale.copied(read_set, 2, copies)
    assert copies.read_text().startswith("@pair0_0/1")


def test_pss_column_notes_and_goal(human_scale, tmp_path):
    rows = [
        {"id": "index:big", "seconds": 421.6, "tree_peak_bytes": 15 * 2**30, "blocks": 2, "bytes": 2**31,
         "predicted_bytes": 0, "threads": 16, "bases": 3_100_000_000, **_pss(9.5, samples=40, at_rss_gib=15.0)},
        _align_row("chr20:one:single", 800_000),  # stamped before PSS was measured: "-"
        _align_row("big:all:single", 730_000, blocks=2, **_pss(22.0, samples=2, at_rss_gib=5.7)),  # 23.62 GB: passes
        _align_row("big:all:paired", 600_000, blocks=2, mode="paired", proper=99.8, **_pss(23.0, fell_back=2)),  # 24.70 GB
    ]  # fmt: skip
    _write(tmp_path, rows)
    verdicts = _verdicts(human_scale, tmp_path)
    assert verdicts["PSS of the human-like genome <= 24 GB, single"] == ("23.62 GB", True)
    assert verdicts["PSS of the human-like genome <= 24 GB, paired"] == ("24.70 GB (RSS counted for some)", False)
    assert verdicts["PSS of the human-like genome <= 24 GB, block by block, single"] == ("-", None)

    lines = human_scale.report(tmp_path).splitlines()
    header = next(line for line in lines if line.startswith("run "))
    assert "peak RSS GiB  peak PSS GiB" in header
    column = header.index("peak PSS GiB") + len("peak PSS GiB")  # the column is right-aligned: cells end there

    def cell(prefix):
        line = next(line for line in lines if line.startswith(prefix))
        return line[:column].split()[-1]

    assert cell("index build, human-like genome") == "9.50"
    assert cell("chr20 ") == "-"
    assert cell("big  ") == "22.00"
    assert next(line for line in lines if line.startswith("big ") and "paired" in line)[:column + 1].split()[-1] == "23.00*"
    notes = [line for line in lines if line.startswith("peak PSS:")]
    assert notes == ["peak PSS: summed Pss (/proc/PID/smaps_rollup) of the process tree, sampled within 1% of one core: "
                     "2-40 samples a row, up to 120 ms a sample; the peak's sample at 95%-100% of the row's peak summed RSS"]  # fmt: skip
    assert any(line.startswith("* smaps_rollup unreadable") for line in lines)


def test_pss_fields_of_a_row_from_its_runs(human_scale):
    old = {"seconds": 8.0, "peak_rss_kib": 100}  # a run stamped before PSS was measured
    first = {"peak_pss_kib": 50, "pss_rss_kib": 90, "pss_samples": 2, "pss_sample_s": 0.1, "pss_fell_back": 0}
    second = {"peak_pss_kib": 70, "pss_rss_kib": 95, "pss_samples": 5, "pss_sample_s": 0.3, "pss_fell_back": 1}
    assert human_scale.pss_fields([old]) == {"peak_pss_kib": None}
    assert human_scale.pss_fields([first, old, second]) == {
        "peak_pss_kib": 70, "pss_rss_kib": 95, "pss_samples": 7, "pss_sample_s": 0.3, "pss_fell_back": 1,
    }  # fmt: skip
