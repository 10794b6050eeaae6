"""A training script in the shape of PyTorch's DDP tutorial series (multigpu_torchrun.py), unchanged in what
matters to a launcher: ``init_process_group`` and ``destroy_process_group`` imported by name, ``LOCAL_RANK`` read
from the environment, DDP, a ``DistributedSampler``, ``argparse`` on ``sys.argv`` under ``__main__``.

Differences from the tutorial, for a host without GPUs: the backend is ``nccl`` only where CUDA is available
(``--backend`` forces one), a small synthetic dataset, and a last line with a checksum of the trained weights.
``--world-size`` passes an explicit world size to ``init_process_group`` (as some scripts do).
Type annotations (and the sampler's type asserted before ``set_epoch``) keep it under the tests' mypy rules.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

Sample = tuple[torch.Tensor, torch.Tensor]


class MyTrainDataset(Dataset[Sample]):
    def __init__(self, size: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.data = [(torch.rand(20, generator=generator), torch.rand(1, generator=generator)) for _ in range(size)]

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> Sample:
        return self.data[index]


def ddp_setup(backend: str | None = None, world_size: int | None = None) -> None:
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl" and torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    if world_size is None:
        init_process_group(backend=backend)
    else:
        init_process_group(backend=backend, world_size=world_size)


class Trainer:
    def __init__(self, model: torch.nn.Module, train_data: DataLoader[Sample], optimizer: torch.optim.Optimizer,
                 save_every: int) -> None:
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.device = torch.device("cuda", self.local_rank) if torch.cuda.is_available() else torch.device("cpu")
        self.model = DDP(model.to(self.device), device_ids=[self.local_rank] if self.device.type == "cuda" else None)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int) -> None:
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[RANK{self.global_rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        assert isinstance(self.train_data.sampler, DistributedSampler)
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source.to(self.device), targets.to(self.device))

    def train(self, max_epochs: int) -> None:
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
        checksum = sum(float(p.detach().double().sum()) for p in self.model.parameters())
        print(f"[RANK{self.global_rank}] final checksum {checksum:.15e}")


def load_train_objs() -> tuple[MyTrainDataset, torch.nn.Linear, torch.optim.SGD]:
    train_set = MyTrainDataset(256)
    torch.manual_seed(0)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset[Sample], batch_size: int) -> DataLoader[Sample]:
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, sampler=DistributedSampler(dataset))


def main(save_every: int, total_epochs: int, batch_size: int, backend: str | None = None,
         world_size: int | None = None) -> None:
    ddp_setup(backend, world_size)
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every)
    trainer.train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int, help="Input batch size on each device")
    parser.add_argument("--backend", default=None, help="Process-group backend (default: nccl with CUDA, else gloo)")
    parser.add_argument("--world-size", default=None, type=int, help="Pass this world size to init_process_group")
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size, args.backend, args.world_size)
