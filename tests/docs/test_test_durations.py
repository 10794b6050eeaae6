"""``ci/test_durations.py`` turns a logged ``.ci/run`` into the dated page of the slowest tests, and refuses a
log it cannot date by the machine's speed; ``ci/machine_speed.py`` prints the figure it reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ci"))

import test_durations  # noqa: E402  (ci/ is a folder of scripts, not a package)

LOG = """\
installs took 212 s
machine speed: 1024x1024 float32 matmul, 2 threads: 41 GFLOPS; a fresh python importing torch: 3.10 s
============================= slowest 50 durations =============================
12.50s call     tests/world/test_engine.py::test_a
3.20s setup    tests/e2e/test_baselines_e2e.py::test_b
41.00s call     tests/experiments/test_ray_train.py::test_smoke[x y]
================ 1200 passed, 40 skipped in 700.12s (0:11:40) =================
================ 180 passed in 95.50s (0:01:35) =================
tests took 800 s
machine speed: 1024x1024 float32 matmul, 2 threads: 38 GFLOPS
ci run took 1012 s
"""


def test_the_page_ranks_the_slowest_beside_the_machine_speed() -> None:
    page = test_durations.page(test_durations.parse(LOG), top=2, day="2026-11-28", source="a fresh clone")
    assert "ran at 41, 38 GFLOPS and a fresh python imported torch in 3.10 s" in page
    assert "Measured on 2026-11-28" in page
    assert "- installs: 212 s (3.5 min)" in page and "- ci run: 1012 s (16.9 min)" in page
    assert "- pytest: 1200 passed, 40 skipped in 700 s (11.7 min)" in page
    rows = [line for line in page.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert rows == ["| 1 | 41.0 | call | `tests/experiments/test_ray_train.py::test_smoke[x y]` |",
                    "| 2 | 12.5 | call | `tests/world/test_engine.py::test_a` |"]
    assert "| 3 |" not in page


@pytest.mark.parametrize(("drop", "problem"), [
    (("s call", "s setup"), "no 'slowest durations' lines in the log"),
    (("GFLOPS",), "no 'machine speed: ... GFLOPS' line in the log"),
])
def test_a_log_without_durations_or_speed_is_refused(tmp_path: Path, drop: tuple[str, ...], problem: str) -> None:
    log = tmp_path / "ci-run.log"
    log.write_text("\n".join(line for line in LOG.splitlines() if not any(d in line for d in drop)))
    done = subprocess.run([sys.executable, str(REPO / "ci" / "test_durations.py"), str(log), "--print"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and problem in done.stderr, done.stdout + done.stderr


def test_the_script_prints_the_page_of_a_log(tmp_path: Path) -> None:
    log = tmp_path / "ci-run.log"
    log.write_text(LOG)
    done = subprocess.run([sys.executable, str(REPO / "ci" / "test_durations.py"), str(log), "--print", "--top", "1",
                           "--date", "2026-01-02"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Where the test command's time goes\n")
    assert "| 1 | 41.0 |" in done.stdout and "| 2 |" not in done.stdout


def test_the_machine_speed_is_one_positive_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """In this process (torch is imported already) with the fewest products and fresh imports that still time
    each: one fresh interpreter importing torch is the only process started."""
    import machine_speed

    assert machine_speed.main(["--json", "--products", "3", "--imports", "1"]) == 0
    speed = json.loads(capsys.readouterr().out)
    assert speed["size"] == 1024 and speed["threads"] == 2 and speed["matmul_gflops"] > 0
    assert speed["import_torch_s"] > 0
