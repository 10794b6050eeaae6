"""A traceback shared by many released ranks is formatted once, and each rank still gets its own exception's
text."""

from __future__ import annotations

import traceback

from pytest_dmlbench.world.simulated.shared_tracebacks import SharedTracebacks, traceback_key


def raised(message: str, where: int = 0) -> BaseException:
    try:
        if where == 0:
            raise RuntimeError(message)
        raise RuntimeError(message)  # the same exception, one line on
    except RuntimeError as exc:
        return exc


def formatted(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def test_alike_tracebacks_are_formatted_once_and_read_as_each_would_alone() -> None:
    texts = SharedTracebacks()
    same = [raised("world aborted: rank 5 failed") for _ in range(50)]
    assert [texts.text(exc, exc.__traceback__) for exc in same] == [formatted(exc) for exc in same]
    assert len(texts) == 1
    # negative controls: another message, or the same raised at another line, is its own text
    other_message, other_line = raised("world aborted: rank 6 failed"), raised("world aborted: rank 5 failed", 1)
    assert texts.text(other_message, other_message.__traceback__) == formatted(other_message)
    assert texts.text(other_line, other_line.__traceback__) == formatted(other_line) != formatted(same[0])
    assert len(texts) == 3


def test_a_chained_exception_is_formatted_with_its_cause_and_not_kept() -> None:
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as exc:
        chained = exc
    texts = SharedTracebacks()
    assert traceback_key(chained, chained.__traceback__) is None
    assert "KeyError: 'inner'" in texts.text(chained, chained.__traceback__)
    assert len(texts) == 0
