"""Training strategies behind one interface: ``build(name, model, *, lr, momentum=0.0, **options)``.

Names: ``ddp``, ``fp16``, ``powersgd`` (:mod:`.ddp`), ``allreduce`` (:mod:`.allreduce`), ``bucketed``
(:mod:`.bucketed`), ``ps`` (:mod:`.parameter_server`), ``local_sgd`` (:mod:`.local_sgd`), ``pipeline``
(:mod:`.pipeline`), ``fsdp`` (:mod:`.fsdp`, FSDP2), ``tensor_parallel`` (:mod:`.tensor_parallel`, DTensor)
and ``robust`` (provided by :mod:`pytest_dmlbench.robust`). Each module is imported on first use;
:func:`register` adds further strategies.
"""

from __future__ import annotations

from pytest_dmlbench.strategies.base import (
    LossFn,
    Strategy,
    available,
    build,
    register,
)

__all__ = ["LossFn", "Strategy", "available", "build", "register"]
