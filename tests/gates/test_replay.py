"""Replayed nights: resampling that keeps neighbouring pairs together, injected slowdowns, and the paired
gate's own trial on recorded pairs."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.gates.paired.recorded import CANARY, RecordedCase, load_recorded, resampled, slowed
from pytest_dmlbench.gates.paired.statistics import SequentialRule
from pytest_dmlbench.gates.replay import Replay, recorded_pair_seconds, replay_night
from pytest_dmlbench.results import Direction

FIGURES: dict[str, tuple[str, Direction]] = {"step_time_s": ("s", "lower"),
                                             "throughput_samples_per_s": ("samples/s", "higher")}


def _case(nodeid: str = "t.py::test_x", noise: float = 0.03, runs: int = 3, pairs: int = 12,
          seed: int = 0) -> RecordedCase:
    """A case recorded in ``runs`` A/A runs: A and B share each pair's machine phase, plus ``noise``."""
    rng = random.Random(seed)
    recorded = []
    for _ in range(runs):
        run = []
        for _ in range(pairs):
            phase = rng.uniform(0.8, 1.25)
            a, b = 0.01 * phase * rng.gauss(1, noise), 0.01 * phase * rng.gauss(1, noise)
            run.append(({"step_time_s": a, "throughput_samples_per_s": 64 / a},
                        {"step_time_s": b, "throughput_samples_per_s": 64 / b}))
        recorded.append(run)
    return RecordedCase(nodeid, 2, 10.0, dict(FIGURES), recorded, [1.0] * runs, 60.0)


def test_resampling_draws_runs_of_consecutive_pairs() -> None:
    run = [({"x": float(i)}, {"x": float(i)}) for i in range(10)]
    case = RecordedCase("t", 2, 10.0, {"x": ("s", "lower")}, [run], [1.0])
    stream = resampled(case, random.Random(1), block=3)
    drawn = [int(next(stream)[0]["x"]) for _ in range(30)]
    blocks = [drawn[i:i + 3] for i in range(0, 30, 3)]
    assert all(b[1] == b[0] + 1 and b[2] == b[1] + 1 for b in blocks), blocks
    assert len({b[0] for b in blocks}) > 1  # negative control: not one block over and over


def test_a_slowdown_makes_times_longer_and_rates_lower() -> None:
    a, b = slowed(({"step_time_s": 1.0, "throughput_samples_per_s": 100.0}, {"step_time_s": 1.0}), FIGURES, 0.1)
    assert a["step_time_s"] == pytest.approx(1.1) and a["throughput_samples_per_s"] == pytest.approx(100 / 1.1)
    assert b == {"step_time_s": 1.0}


def test_the_replayed_decision_is_the_gates_own() -> None:
    case = _case()
    gate = Replay(run_alpha=0.01, judged_cases=1)
    same = gate.replay_case(case, random.Random(3))
    assert {v.kind for v in same} == {"unchanged"}, [v.message for v in same]
    slow = gate.replay_case(case, random.Random(3), slowdown=0.3)
    assert {v.kind for v in slow} == {"regression"}, [v.message for v in slow]
    assert "confirmed yes by the second stage" in slow[0].message  # the confirmation ran on replayed pairs
    # the pair budget is spent on the recorded cost of a pair: 60 s at 10 s a pair stops at the minimum
    costly = _case(noise=0.3)
    costly.seconds_per_pair = [10.0] * 3
    verdicts = Replay(0.01, 1).replay_case(costly, random.Random(4))
    # (42 % per-pair noise: 7 pairs leave an interval of about +-50 %, never clear of a 10 % threshold)
    assert {v.kind for v in verdicts} == {"inconclusive"}, [v.message for v in verdicts]
    assert all("pair budget of 60 s spent after 7 pairs" in v.message and "over 7 block pairs" in v.message
               for v in verdicts)


def test_an_improvement_is_confirmed_like_a_regression_even_when_it_would_not_fail() -> None:
    """A reported change, either way, rests on two independent stages: an improvement found by the first
    stage alone (4 pairs at 1 %) was printed on unchanged code (a +16 % "improvement" in a whole A/A night)."""
    gate = Replay(run_alpha=0.01, judged_cases=1)  # improvements do not fail this run
    faster = gate.replay_case(_case(), random.Random(3), slowdown=-0.3)
    assert {v.kind for v in faster} == {"improvement"}, [v.message for v in faster]
    assert all("confirmed yes by the second stage" in v.message for v in faster), [v.message for v in faster]


def test_a_night_reports_the_slowed_case_and_any_other_red() -> None:
    cases = [_case(f"t.py::test_{i}", seed=i) for i in range(5)]
    quiet = replay_night(cases, random.Random(5), 0.01)
    assert quiet.red_cases == () and quiet.slowed_kind is None
    night = replay_night(cases, random.Random(5), 0.01, "t.py::test_2", 0.3)
    assert night.slowed_kind == "regression" and night.red_cases == ("t.py::test_2",)


def test_a_night_costs_its_pairs_and_a_lower_threshold_costs_more() -> None:
    """Each replayed pair costs its case's recorded seconds; a threshold nearer the noise needs longer stages
    (negative control: the same cases at 10 % cost less), and the recorded runs' own spend is summed per run."""
    def night(threshold: float) -> tuple[float, int]:
        cases = [_case(f"t.py::test_{i}", seed=i) for i in range(5)]
        for case in cases:
            case.threshold_pct = threshold
        outcome = replay_night(cases, random.Random(5), 0.01)
        return outcome.pair_seconds, outcome.unsettled
    wide, narrow = night(10.0), night(2.0)
    assert wide[0] >= 5 * 4  # 1 s a pair, at least the 4-pair minimum per case
    assert narrow[0] > 2 * wide[0], (wide, narrow)
    assert wide[1] == 0
    cases = [_case(f"t.py::test_{i}", seed=i, runs=2, pairs=6) for i in range(3)]
    cases[0].seconds_per_pair = [2.0, 4.0]
    assert recorded_pair_seconds(cases) == pytest.approx((12 + 24) / 2 + 2 * 6)


def test_the_futility_stop_spends_fewer_pairs_on_figures_no_cap_could_settle_and_still_catches_a_slowdown() -> None:
    """Cases whose per-pair noise (about 17 %) no 24 pairs settle against a 10 % threshold: curtailed, their
    nights cost fewer pairs (negative control: the same night without the stop); a case made 60 % slower
    reads beyond the threshold, so it is never curtailed and is still caught."""
    cases = [_case(f"t.py::test_{i}", noise=0.12, seed=i) for i in range(5)]
    plain = replay_night(cases, random.Random(8), 0.01)
    curtailed = replay_night(cases, random.Random(8), 0.01, rule=SequentialRule(futility=True))
    assert curtailed.red_cases == () and plain.red_cases == ()
    assert curtailed.pair_seconds < 0.5 * plain.pair_seconds, (curtailed, plain)
    slow = replay_night(cases, random.Random(8), 0.01, "t.py::test_2", 0.6, rule=SequentialRule(futility=True))
    assert slow.slowed_kind == "regression" and slow.red_cases == ("t.py::test_2",)


def _phased_case(seed: int = 0) -> RecordedCase:
    """A/A pairs whose two blocks met different machine phases (up to 25 % apart), each seen by its canary."""
    rng = random.Random(seed)
    run = []
    for _ in range(24):
        phase_a, phase_b = rng.uniform(0.8, 1.25), rng.uniform(0.8, 1.25)
        a, b = 0.01 * phase_a * rng.gauss(1, 0.01), 0.01 * phase_b * rng.gauss(1, 0.01)
        run.append(({"step_time_s": a, CANARY: 0.003 * phase_a * rng.gauss(1, 0.005)},
                    {"step_time_s": b, CANARY: 0.003 * phase_b * rng.gauss(1, 0.005)}))
    return RecordedCase("t.py::test_phased", 4, 10.0, {"step_time_s": ("s", "lower")}, [run], [3.5], 60.0)


def test_a_replayed_night_adjusts_for_the_recorded_canary_when_told() -> None:
    case = _phased_case()
    plain = Replay(0.01, 1).replay_case(case, random.Random(7))
    adjusted = Replay(0.01, 1, canary_adjust=True).replay_case(case, random.Random(7))
    # negative control: without the canary the phases leave the interval wider than the threshold band
    assert {v.kind for v in plain} == {"inconclusive"}, [v.message for v in plain]
    assert {v.kind for v in adjusted} == {"unchanged"}, [v.message for v in adjusted]
    slow = Replay(0.01, 1, canary_adjust=True).replay_case(case, random.Random(7), slowdown=0.2)
    assert {v.kind for v in slow} == {"regression"}, [v.message for v in slow]  # the canary is never slowed
    pair = slowed(case.runs[0][0], case.figures, 0.2)
    assert pair[0][CANARY] == case.runs[0][0][0][CANARY]


def test_recorded_pairs_are_read_from_a_results_file(tmp_path: Path) -> None:
    stage = {"a_first": [True, False], "a": {"step_time_s": [0.011, 0.012]}, "b": {"step_time_s": [0.010, 0.012]}}
    results: dict[str, Any] = {"run": {"threshold_pct": 10}, "cases": [
        {"nodeid": "t.py::test_x", "world_size": 4, "threshold_pct": None,
         "metrics": {"step_time_s": {"unit": "s", "better": "lower"}, "peak_rss_mb": {"unit": "MB", "better": "lower"}},
         "extra": {"paired": {"block_medians": [stage], "seconds": 4.0, "budget_s": 60.0}}}]}
    path = tmp_path / "night.json"
    path.write_text(json.dumps(results))
    recorded = load_recorded([path, path])["t.py::test_x"]
    assert recorded.figures == {"step_time_s": ("s", "lower")}  # an old recording: no block readings of memory
    assert len(recorded.runs) == 2 and recorded.runs[0][0] == ({"step_time_s": 0.011}, {"step_time_s": 0.010})
    assert recorded.seconds_per_pair == [2.0, 2.0] and recorded.world_size == 4
    assert recorded.threshold_pct == 10.0
    assert load_recorded([path], run_threshold_pct=5.0)["t.py::test_x"].threshold_pct == 5.0  # another run threshold
    packed = tmp_path / "night.json.gz"  # a kept recording, compressed: read the same
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert load_recorded([packed])["t.py::test_x"].runs == load_recorded([path])["t.py::test_x"].runs
    packed.write_bytes(path.read_bytes()[:40])  # negative control: a file that is no gzip is named
    with pytest.raises(ValueError, match=re.escape("night.json.gz: not a readable results file")):
        load_recorded([packed])
    stage["canary"] = {"a": [0.003, 0.004], "b": [0.002, 0.003]}  # recorded since the canary: kept with its pair
    path.write_text(json.dumps(results))
    assert load_recorded([path])["t.py::test_x"].runs[0][1] == ({"step_time_s": 0.012, CANARY: 0.004},
                                                                 {"step_time_s": 0.012, CANARY: 0.003})
    results["cases"][0]["threshold_pct"] = 50  # a case's marker threshold is its own under any run threshold
    path.write_text(json.dumps(results))
    assert load_recorded([path], run_threshold_pct=5.0)["t.py::test_x"].threshold_pct == 50.0


def test_a_recording_that_keeps_memory_readings_replays_memory_peaks(tmp_path: Path) -> None:
    """From 0.4 on a stage records each block's single readings beside the timed medians; the replay judges
    them (a memory peak on kept worlds: never unchanged at a 10 % threshold, never a regression A/A)."""
    pairs = 8
    stage = {"a_first": [i % 2 == 0 for i in range(pairs)],
             "a": {"step_time_s": [0.010 + 1e-4 * (i % 3) for i in range(pairs)], "peak_rss_mb": [520.0] * pairs},
             "b": {"step_time_s": [0.010 + 1e-4 * (i % 2) for i in range(pairs)], "peak_rss_mb": [500.0] * pairs}}
    results: dict[str, Any] = {"run": {"threshold_pct": 10}, "cases": [
        {"nodeid": "t.py::test_x", "world_size": 4, "threshold_pct": None,
         "metrics": {"step_time_s": {"unit": "s", "better": "lower"}, "peak_rss_mb": {"unit": "MB", "better": "lower"}},
         "extra": {"paired": {"block_medians": [stage], "seconds": 8.0, "budget_s": 60.0}}}]}
    path = tmp_path / "night.json"
    path.write_text(json.dumps(results))
    recorded = load_recorded([path])["t.py::test_x"]
    assert recorded.figures == {"step_time_s": ("s", "lower"), "peak_rss_mb": ("MB", "lower")}
    verdicts = {v.metric: v for v in Replay(0.01, 1).replay_case(recorded, random.Random(0), slowdown=0.3)}
    assert verdicts["step_time_s"].kind == "regression", verdicts["step_time_s"].message
    peak = verdicts["peak_rss_mb"]  # a slowdown takes time, not memory: A's peak stays 4 % above B's
    assert peak.kind == "inconclusive" and peak.cause == "unsettled" and "kept worlds" in peak.message, peak.message


def test_a_file_without_recorded_pairs_is_refused_by_name(tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"cases": [{"nodeid": "t", "metrics": {}}]}))
    with pytest.raises(ValueError, match=re.escape("plain.json: no case records block pairs")):
        load_recorded([plain])
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ValueError, match=re.escape("broken.json: not a readable results file")):
        load_recorded([broken])


def _deterministic_case() -> RecordedCase:
    """A seeded training's accuracy: every block of either side reads the same value."""
    run = [({"accuracy": 0.86}, {"accuracy": 0.86}) for _ in range(8)]
    return RecordedCase("t.py::test_seeded", 4, 10.0, {"accuracy": ("fraction", "higher")}, [run], [1.0], 60.0)


def test_a_figure_that_reads_exactly_alike_ends_its_stage_at_two_pairs_and_a_changed_one_does_not() -> None:
    unchanged = Replay(0.01, 1).replay_case(_deterministic_case(), random.Random(3))
    assert [v.kind for v in unchanged] == ["unchanged"], [v.message for v in unchanged]
    assert "over 2 block pairs" in unchanged[0].message, unchanged[0].message
    # negative control: the same figure made worse is tested on the ordinary minimum and fails
    worse = Replay(0.01, 1).replay_case(_deterministic_case(), random.Random(3), slowdown=0.2)
    assert [v.kind for v in worse] == ["regression"], [v.message for v in worse]
    assert "over 2 block pairs" not in worse[0].message, worse[0].message


def test_a_confirmation_gets_pairs_of_its_own_after_a_first_stage_spent_the_budget() -> None:
    """A heavy case (5 s a pair, a 60 s budget) made 10 % slower: where its first stage spent the budget, the
    confirmation still gets pairs on a budget of its own (a budget shared with the first stage left it
    exactly the 4-pair minimum), so the slowdown is confirmed. Negative control: a confirmation held to that
    minimum confirms far fewer of the same nights."""
    case = _case("t.py::test_heavy", noise=0.06)
    case.threshold_pct, case.seconds_per_pair = 5.0, [5.0] * len(case.runs)

    def nights(rule: SequentialRule) -> tuple[int, list[list[int]], list[str]]:
        rng, caught, gate = random.Random(4), 0, Replay(0.01, 1, rule=rule)
        for _ in range(20):
            verdicts = gate.replay_case(case, rng, 0.10)
            caught += any(v.metric == "step_time_s" and v.kind == "regression" for v in verdicts)
        return caught, [j.stages for j in gate.judgements], [n for j in gate.judgements for n in j.notes]

    caught, stages, notes = nights(SequentialRule())
    after_spent = [s[1] for s in stages if len(s) == 2 and s[0] * 5.0 > 60.0]
    assert after_spent and max(after_spent) > 4, stages
    assert any(n.startswith("the confirmation's pair budget of 60 s spent") for n in notes), notes
    held, held_stages, _ = nights(SequentialRule(confirm_max_pairs=4))
    assert all(s[1] == 4 for s in held_stages if len(s) == 2)
    assert caught >= 16 and held <= caught - 6, (caught, held, stages)


GOLDEN = Path(__file__).parent / "data" / "replay_night6_golden.json.gz"
NIGHT6 = Path(__file__).resolve().parents[2] / "studies" / "recordings" / "night6-aa-ws4-2026-11-27.json.gz"


def _replayed_night6(futility: bool, canary: bool, slowdown: float) -> dict[str, Any]:
    """Night 6 replayed once with seed 11, every fifth case made ``slowdown`` worse: per case its stages,
    notes, a digest of its recorded block medians and its verdicts' kinds and messages."""
    cases = sorted(load_recorded([NIGHT6]).values(), key=lambda c: c.nodeid)
    rng, replay = random.Random(11), Replay(0.01, len(cases), SequentialRule(futility=futility), canary_adjust=canary)
    night = []
    for i, case in enumerate(cases):
        slowed_by = slowdown if i % 5 == 0 else 0.0
        verdicts = replay.replay_case(case, rng, slowed_by)
        judgement = replay.judgements[-1]
        medians = hashlib.sha256(json.dumps(judgement.block_medians, sort_keys=True).encode()).hexdigest()[:16]
        night.append({"nodeid": case.nodeid, "slowdown": slowed_by, "stages": judgement.stages,
                      "notes": judgement.notes, "budget_spent": judgement.budget_spent, "block_medians": medians,
                      "verdicts": [{"metric": v.metric, "kind": v.kind, "message": v.message,
                                    "cause": v.inconclusive_cause} for v in verdicts]})
    return {"futility": futility, "canary": canary, "slowdown": slowdown, "cases": night,
            "clock": round(replay.clock, 6)}


@pytest.mark.parametrize(("index", "night", "futility", "canary", "slowdown"),
                         [(0, "quiet", True, False, 0.0), (1, "slowed", True, False, 0.2),
                          (2, "canary", False, True, 0.1)])
def test_night_6_replays_to_the_same_pairs_and_changes_and_only_unproven_unchanged_verdicts_turn_unsettled(
        index: int, night: str, futility: bool, canary: bool, slowdown: float) -> None:
    """The golden file holds what the paired gate's decision code gave on night 6 before "unchanged only when
    proven" (f9a8019, and the trial split out of the gate after it): the same seed gives the same pairs, so the
    same stages, budgets and clock, and every regression, improvement and untested verdict as before; only a
    verdict that was ``unchanged`` may now be ``inconclusive (tested, not settled)``, and it is exactly when its
    interval reaches outside the band."""
    golden = json.loads(gzip.decompress(GOLDEN.read_bytes()))[index]
    assert golden["night"] == night
    replayed = json.loads(json.dumps(_replayed_night6(futility, canary, slowdown)))  # as JSON reads it back
    kinds = [v["kind"] for c in golden["cases"] for v in c["verdicts"]]
    assert len(replayed["cases"]) == len(golden["cases"]) == 157
    assert night == "quiet" or "regression" in kinds  # the file holds changes to reproduce, not only quiet
    turned = 0
    for old, new in zip(golden["cases"], replayed["cases"], strict=True):
        assert (new["stages"], new["budget_spent"], new["block_medians"]) == (
            old["stages"], old["budget_spent"], old["block_medians"]), old["nodeid"]
        for was, now in zip(old["verdicts"], new["verdicts"], strict=True):
            assert was["metric"] == now["metric"]
            if was["kind"] != "unchanged":
                assert (now["kind"], now["cause"]) == (was["kind"], was["cause"]), now["message"]
                continue
            assert now["kind"] in ("unchanged", "inconclusive"), now["message"]
            proven = "reaches outside the band" not in now["message"]
            assert (now["kind"] == "unchanged") == proven, now["message"]
            turned += now["kind"] == "inconclusive"
    assert replayed["clock"] == golden["clock"]
    # negative control: the old rule's unproven verdicts exist on this night, and the new rule turns them
    assert turned > 0
