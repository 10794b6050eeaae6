"""pytest's assertion explanations for code that runs in forked ranks.

pytest installs its comparison hook (``assert a == b`` -> "At index 2 diff: ...") only while a test runs
in the pytest process. Installing it just while the zygote is forked lets every rank inherit it, so
rank-side code never needs to import pytest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from _pytest.assertion import util


def _explainer(config: pytest.Config) -> Any:
    def explain(op: str, left: object, right: object) -> str | None:
        for lines in config.hook.pytest_assertrepr_compare(config=config, op=op, left=left, right=right):
            if lines:
                text = "\n~".join(line.replace("\n", "\\n") for line in lines)
                return text.replace("%", "%%") if config.getvalue("assertmode") == "rewrite" else text
        return None

    return explain


@contextmanager
def assertion_explanations(config: pytest.Config) -> Iterator[None]:
    """Within the block, rewritten asserts explain comparisons as they do inside a pytest test."""
    saved = util._reprcompare, getattr(util, "_config", None)
    util._reprcompare = _explainer(config)
    util._config = config
    try:
        yield
    finally:
        util._reprcompare, util._config = saved
