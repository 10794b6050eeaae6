"""Drift across nights: the stored history of nightly results (:mod:`.history`), a step detector over it
(:mod:`.detect`), the findings per case-metric (:mod:`.findings`), their text, markdown and HTML views
(:mod:`.render`) and the ``python -m pytest_dmlbench drift`` command (:mod:`.command`)."""
