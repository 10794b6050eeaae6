"""A torchrun-style training script, written for the tests the way such scripts are written: it reads RANK,
LOCAL_RANK and WORLD_SIZE, calls init_process_group, trains a DDP model on a DistributedSampler's shard, prints
each step's loss, writes a checkpoint per rank and calls destroy_process_group.

    torchrun --nproc-per-node 2 torchrun_train.py --out ckpt/

``--no-env`` is the variant that ignores the variables (it trains as one process, whatever launched it).
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--no-env", action="store_true")
    args = parser.parse_args()
    distributed = not args.no_env and "RANK" in os.environ
    rank = int(os.environ["RANK"]) if distributed else 0
    local_rank = int(os.environ["LOCAL_RANK"]) if distributed else 0
    world_size = int(os.environ["WORLD_SIZE"]) if distributed else 1
    if distributed:
        dist.init_process_group("gloo")
        assert dist.get_rank() == rank and dist.get_world_size() == world_size
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).double()
    model: torch.nn.Module = DDP(net) if distributed else net
    data = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(64, 8, generator=data, dtype=torch.float64),
                            torch.randint(0, 3, (64,), generator=data))
    sampler: DistributedSampler[int] = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True,
                                                          seed=0)
    loader = DataLoader(dataset, batch_size=32 // world_size, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    step = 0
    for epoch in range(args.steps):
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
            optimizer.step()
            total = loss.detach().clone()
            if distributed:
                dist.all_reduce(total)
            print(f"step {step} rank {rank} local_rank {local_rank} loss {total.item() / world_size!r}", flush=True)
            step += 1
    os.makedirs(args.out, exist_ok=True)
    state = model.module.state_dict() if isinstance(model, DDP) else model.state_dict()
    torch.save(state, os.path.join(args.out, f"checkpoint-rank{rank}.pt"))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
