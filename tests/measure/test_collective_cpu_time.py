"""A collective benchmark's CPU time, on a real two-rank gloo world: read on the whole rank process, because
gloo's own threads copy, reduce and send while the calling thread waits."""

from __future__ import annotations

import multiprocessing
import queue
import socket
from typing import Any

from pytest_dmlbench.results.stats import median

LARGE = 16 << 20  # bytes: an all_reduce whose copying and reduction take milliseconds of CPU
SMALL = 4096


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rank(rank: int, port: int, results: Any) -> None:
    """One rank (a spawned process): the benchmark's figures, and the calling thread's own CPU time of a large
    all_reduce beside the whole process's (the negative control: the thread alone misses the work)."""
    import torch
    import torch.distributed as dist

    from pytest_dmlbench.measure.clock import cpu_now
    from pytest_dmlbench.measure.collective_bench import bench_collective

    torch.set_num_threads(1)  # as the plugin's ranks run: one intra-op thread
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        small = bench_collective("all_reduce", SMALL, iters=5, warmup=2, rounds=5)
        large = bench_collective("all_reduce", LARGE, iters=2, warmup=1, rounds=5)
        buffer = torch.zeros(LARGE // 4)
        thread, process = [], []
        for _ in range(5):
            dist.barrier()
            thread_start, process_start = cpu_now(), cpu_now(whole_process=True)
            dist.all_reduce(buffer)
            thread.append(cpu_now() - thread_start)
            process.append(cpu_now(whole_process=True) - process_start)
        results.put((rank, {name: metric.samples for name, metric in small.metrics().items()},
                     {name: metric.samples for name, metric in large.metrics().items()},
                     median(thread), median(process)))
    finally:
        dist.destroy_process_group()


def _run_two_ranks() -> dict[int, tuple[Any, ...]]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    ranks = [context.Process(target=_rank, args=(rank, port, results)) for rank in range(2)]
    for process in ranks:
        process.start()
    got: dict[int, tuple[Any, ...]] = {}
    try:
        while len(got) < len(ranks):
            try:
                row = results.get(timeout=1)
            except queue.Empty:  # a rank that died sends nothing: name it rather than wait for it
                dead = [(rank, p.exitcode) for rank, p in enumerate(ranks) if p.exitcode not in (None, 0)]
                assert not dead, f"ranks that exited before reporting (rank, exit code): {dead}"
                continue
            got[row[0]] = row[1:]
    finally:
        for process in ranks:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    assert [p.exitcode for p in ranks] == [0, 0]
    return got


def test_a_collective_records_its_ranks_cpu_time_which_the_calling_thread_alone_would_miss() -> None:
    got = _run_two_ranks()
    (small0, large0, thread, process), (small1, large1, _, _) = got[0], got[1]
    # recorded beside wall time, one reading a round, summed over ranks so every rank holds the same figure
    assert set(large0) == {"step_time_s", "algbw_gbps", "busbw_gbps", "cpu_time_s"}
    assert len(large0["cpu_time_s"]) == len(large0["step_time_s"]) == 5
    assert large0["cpu_time_s"] == large1["cpu_time_s"] and small0["cpu_time_s"] == small1["cpu_time_s"]
    # it counts the collective's work: 4,096 times the bytes cost many times the CPU
    assert median(large0["cpu_time_s"]) > 3 * median(small0["cpu_time_s"]) > 0
    # negative control: the calling thread waits while gloo's threads work, so its own CPU time misses most of it
    assert thread < 0.5 * process, (thread, process)


def test_where_cpu_time_cannot_be_read_a_collective_records_the_rest_and_says_why(world1: None) -> None:
    from pytest_dmlbench.measure.bench import RankBench
    from pytest_dmlbench.measure.clock import use_cpu_clock
    from pytest_dmlbench.measure.dist_info import DistInfo

    def unreadable() -> float:
        raise OSError("CLOCK_THREAD_CPUTIME_ID not supported")

    bench = RankBench(DistInfo(0, 1, "gloo", "cpu"))
    with use_cpu_clock(unreadable):
        bench.collective("all_reduce", SMALL, iters=2, warmup=0, rounds=3)
    assert set(bench.metrics) == {"step_time_s", "algbw_gbps", "busbw_gbps"}
    assert len(bench.metrics["step_time_s"].samples) == 3
    assert any("cannot read a thread's CPU time" in note for note in bench.notes), bench.notes
