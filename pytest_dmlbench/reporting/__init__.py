"""What the run tells the user through pytest's reporting: :mod:`.results_reporter` (every case's results
gathered where reports arrive; the table, the results file and the job summary at the end), :mod:`.progress`
(each case's headline figure as it finishes, and the paired gate's sign of life), :mod:`.not_judged`
(validations that could not judge their target, listed and counted) and :mod:`.interruption` (a run stopped
before its end says so first). The results model and its rendering, free of pytest, are :mod:`pytest_dmlbench.results`.
"""
