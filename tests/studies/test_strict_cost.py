"""``studies/strict_cost.py`` runs its cases with strict mode off and on and reports both, at a size small enough
for every CI run; a case that fails stops the study with its report; bad input is refused."""

from __future__ import annotations

from typing import Any

import pytest

from studies import strict_cost


def test_every_case_runs_off_and_on_and_a_row_reports_both(capsys: pytest.CaptureFixture[str]) -> None:
    rows = strict_cost.main(["--ranks", "2", "--pairs", "1", "--cases", "ring,async"])
    assert [(r["case"], r["ranks"]) for r in rows] == [("ring", 2), ("async", 2)]
    assert all(r["off_s"] > 0 and r["on_s"] > 0 and r["ratio"] == r["on_s"] / r["off_s"] for r in rows)
    assert all(r["off_cpu_s"] > 0 and r["on_cpu_s"] > 0 for r in rows)
    assert "| ring | 2 |" in capsys.readouterr().out


def test_a_failing_case_stops_the_study_and_bad_input_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(info: Any) -> None:
        raise AssertionError("wrong on purpose")

    monkeypatch.setitem(strict_cost.CASES, "broken", broken)
    with pytest.raises(SystemExit, match=r"(?s)broken at 2 ranks \(strict False\) did not pass:.*wrong on purpose"):
        strict_cost.main(["--ranks", "2", "--cases", "broken"])
    with pytest.raises(SystemExit):
        strict_cost.main(["--cases", "nope"])
