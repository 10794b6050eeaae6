"""Every study has a test here and a row in ``studies/README.md``, and none edits ``sys.path`` (they import each
other as ``studies.x``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = {"__init__", "scratch_repo", "injected_slowdown"}  # the package and the code studies share, not studies


def studies(root: Path = ROOT) -> list[str]:
    return sorted(p.stem for p in (root / "studies").glob("*.py") if p.stem not in SHARED)


def layout_problems(root: Path = ROOT) -> list[str]:
    readme = (root / "studies" / "README.md").read_text()
    problems = [f"studies/{name}.py has no tests/studies/test_{name}.py" for name in studies(root)
                if not (root / "tests" / "studies" / f"test_{name}.py").is_file()]
    problems += [f"studies/{name}.py has no row in studies/README.md" for name in studies(root)
                 if f"| `{name}` |" not in readme or f"`python -m studies.{name}" not in readme]
    problems += [f"{path.relative_to(root)} edits sys.path" for path in sorted((root / "studies").glob("*.py"))
                 if "sys.path" in path.read_text()]
    return problems


def test_every_study_has_a_test_and_a_readme_row_and_no_path_edit() -> None:
    assert len(studies()) >= 24
    assert layout_problems() == []


def test_negative_control_a_study_without_test_or_row_is_named(tmp_path: Path) -> None:
    (tmp_path / "studies").mkdir()
    (tmp_path / "tests" / "studies").mkdir(parents=True)
    (tmp_path / "studies" / "README.md").write_text("| `old` | ... | `python -m studies.old` | ... |\n")
    (tmp_path / "studies" / "old.py").write_text('"""Old."""\n')
    (tmp_path / "tests" / "studies" / "test_old.py").write_text("")
    (tmp_path / "studies" / "new.py").write_text("import sys\nsys.path.insert(0, '.')\n")
    assert layout_problems(tmp_path) == ["studies/new.py has no tests/studies/test_new.py",
                                         "studies/new.py has no row in studies/README.md",
                                         "studies/new.py edits sys.path"]
