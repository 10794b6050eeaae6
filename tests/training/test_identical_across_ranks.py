"""The bit-identity check of the equivalence cases: which ranks disagree, and with which rank of their key.

Run in-process on 4 simulated ranks; every rank must get the same answer (the check is collective)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from pytest_dmlbench.training.reference import assert_identical_across_ranks, disagreeing_ranks
from tests.world.simulated.helpers import passed, simulate


def test_disagreeing_ranks_names_each_rank_and_the_first_rank_of_its_key() -> None:
    """Ranks 1 and 3 differ from rank 0 (with one key, both are named against rank 0); keyed by ``rank % 2`` the
    groups are {0, 2} and {1, 3}, so only rank 3 differs (from rank 1); with keys 5, 2, 5, 2 the first rank of a
    key is its reference, not the rank of the lowest key. Equal tensors on every rank: nobody disagrees."""

    def body(info: object) -> None:
        rank = dist.get_rank()
        same = torch.arange(6, dtype=torch.float64)
        assert disagreeing_ranks(same) == []  # negative control: nobody differs
        assert_identical_across_ranks(same, what="params")
        two_differ = same + (rank if rank in (1, 3) else 0)  # ranks 1 and 3 differ from 0, and from each other
        assert disagreeing_ranks(two_differ) == [(1, 0), (3, 0)]
        with pytest.raises(AssertionError) as raised:
            assert_identical_across_ranks(two_differ, what="params after step 1")
        assert str(raised.value) == ("params after step 1 not bit-identical across ranks: "
                                     "rank 1 != rank 0, rank 3 != rank 0")
        one_odd = same + (1 if rank in (1, 3) else 0) + (1 if rank == 3 else 0)  # 0, 2 alike; 1, 3 differ
        assert disagreeing_ranks(one_odd, key=rank % 2) == [(3, 1)]
        assert disagreeing_ranks(one_odd, key=(5, 2, 5, 2)[rank]) == [(3, 1)]
        assert disagreeing_ranks(one_odd) == [(1, 0), (3, 0)]  # the keys, not the values, grouped 1 with 3
        one_bit = same.clone()
        if rank == 2:
            one_bit[5] = torch.nextafter(one_bit[5], torch.tensor(10.0, dtype=torch.float64))
        assert disagreeing_ranks(one_bit, key=rank % 2) == [(2, 0)]  # one bit apart is a difference

    assert passed(simulate(body, 4), 4)
