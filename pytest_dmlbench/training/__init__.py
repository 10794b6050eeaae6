"""The training library beside the strategies: :mod:`.models` (the model zoo) and :mod:`.reference`
(single-process reference steps and the rank-agreed checks of the equivalence suite). Data sets and
sharding are :mod:`pytest_dmlbench.data`.
"""
