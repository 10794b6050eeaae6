"""The one communication-accounting layer: every byte a rank hands to ``torch.distributed`` is counted here.

It is the one place that counts communication. Other modules wrap parts of ``torch.distributed`` too, for
other ends, and every one installs and restores through one registry (``measure/torch_patches.py``):
``world/groups.py`` the point-to-point methods of ``ProcessGroup`` (to tell a case that left an exchange
unmatched), ``world/adopt_group.py`` init and destroy inside a case, ``world/bound_store.py`` the rendezvous
store, ``world/simulated/thread_world.py`` the group registry; ``world/guard.py`` puts back whatever a case
replaced or left patched, and ``strategies/zero.py`` routes DeepSpeed's communication backend through this
module.
``with instrument_collectives() as counter:``
replaces the collective functions of ``torch.distributed`` (and of ``torch.distributed.distributed_c10d``)
by counting wrappers; they are restored when the last active counter exits. Strategies count their
bytes per step with it (``Strategy.step``), the benchmark runner counts bytes and time per round with it,
and both see the same calls, so ``strategy.comm_bytes_last_step`` and the runner's ``comm_bytes_per_step``
agree by construction. Every call records, into every active :class:`CommCounter`:

- ``bytes``: the payload this rank hands to the collective (see :data:`PAYLOAD`); ``barrier`` counts
  calls and time but no bytes, and neither does any collective in a group of one rank (nothing leaves
  the process; a world of one rank reports zero communication bytes);
- ``blocked_s``: time the calling thread spent inside the call, plus inside ``Work.wait()`` for
  ``async_op=True`` calls and ``isend``/``irecv``;
- ``busy_s``: the union of the intervals [issue, completion] over all calls, so overlapping asynchronous
  collectives are not counted twice. An asynchronous call completes when its ``wait()`` returns, when
  ``is_completed()`` first reports True, or when the future from ``get_future()`` is done. That future is
  chained after the record, so once its ``wait()`` returns the interval is in the counter.

``isend``/``irecv`` are recorded under the operation names ``send``/``recv``. Communication that happens
out of Python's sight (DDP's C++ buffer broadcast) is added with :func:`account`. An interceptor installed
with :func:`set_interceptor` sees every counted operation (``fn(op, nbytes, call)``; it must return
``call()``'s result): tests use it to check what a strategy sends.

What is seen: calls of the functions named in :data:`PAYLOAD` made through the module attribute at call
time (``dist.all_reduce(...)``, ``torch.distributed.distributed_c10d.all_reduce(...)``), including those
made by Python DDP communication hooks such as ``allreduce_hook`` and by FSDP2 (``fully_shard``: its
``all_gather_single`` and ``reduce_scatter_single``), and the functional collectives of
``torch.distributed._functional_collectives`` named in :data:`FUNCTIONAL_PAYLOAD` (what DTensor, and so
tensor parallelism, calls); a collective that torch implements by calling another one is counted once. A
functional collective returns its tensor before the data has arrived; its interval ends when the call
returns (the wait, at the tensor's first use, is not seen). What is NOT seen: functions bound before
instrumentation (``from torch.distributed import all_reduce`` at import time), calls on ``ProcessGroup``
objects directly, ``*_object`` collectives, ``batch_isend_irecv``, ``torch.ops._c10d_functional`` operators
called directly (compiled graphs, DTensor's shard-to-shard all-to-all), and everything DDP's C++ reducer
does on its own: DDP without a registered Python hook all-reduces its buckets in C++. Register
:func:`counting_comm_hook` (it wraps the default ``allreduce_hook``, or any hook you pass) to count DDP's
bucket bytes and their completion time.
Asynchronous handles are returned wrapped in a proxy (attribute access is forwarded), so code that checks
``isinstance(work, dist.Work)`` sees a different type while instrumentation is on.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_dmlbench.measure import torch_patches
from pytest_dmlbench.measure.clock import now

if TYPE_CHECKING:
    import torch


def _nbytes(tensor: torch.Tensor | None) -> int:
    return 0 if tensor is None else int(tensor.numel() * tensor.element_size())


def _list_nbytes(tensors: list[torch.Tensor] | None) -> int:
    return sum(_nbytes(t) for t in tensors or ())


def _arg(name: str) -> Callable[[Mapping[str, Any]], int]:
    return lambda args: _nbytes(args.get(name))


def _list_arg(name: str) -> Callable[[Mapping[str, Any]], int]:
    return lambda args: _list_nbytes(args.get(name))


# Payload bytes this rank hands to each collective, from its bound arguments: the tensor it contributes
# (or, for recv/irecv, the buffer it hands over to be filled). all_gather: its own input, not the gathered
# output; reduce_scatter: its whole input; broadcast: the tensor on every rank, source or not.
PAYLOAD: dict[str, Callable[[Mapping[str, Any]], int]] = {
    "all_reduce": _arg("tensor"),
    "all_gather": _arg("tensor"),
    "all_gather_into_tensor": _arg("input_tensor"),
    "all_gather_single": _arg("input_tensor"),
    "all_gather_coalesced": _list_arg("input_tensor_list"),
    "reduce_scatter": _list_arg("input_list"),
    "reduce_scatter_tensor": _arg("input"),
    "reduce_scatter_single": _arg("input"),
    "all_reduce_coalesced": _list_arg("tensors"),
    "broadcast": _arg("tensor"),
    "reduce": _arg("tensor"),
    "all_to_all": _list_arg("input_tensor_list"),
    "all_to_all_single": _arg("input"),
    "gather": _arg("tensor"),
    "scatter": _arg("tensor"),
    "send": _arg("tensor"),
    "recv": _arg("tensor"),
    "isend": _arg("tensor"),
    "irecv": _arg("tensor"),
    "barrier": lambda args: 0,
}

# The functional collectives (``torch.distributed._functional_collectives``, what DTensor and so tensor
# parallelism call): the tensor this rank contributes is ``self`` (``inputs`` for the coalesced
# reduce-scatters). Recorded under their name without ``_autograd``, by the same payload rule as above.
FUNCTIONAL_PAYLOAD: dict[str, Callable[[Mapping[str, Any]], int]] = {
    "all_reduce": _arg("self"),
    "all_reduce_coalesced": _list_arg("self"),
    "broadcast": _arg("self"),
    "all_gather_tensor": _arg("self"),
    "all_gather_tensor_autograd": _arg("self"),
    "all_gather_single": _arg("self"),
    "all_gather_single_autograd": _arg("self"),
    "all_gather_into_tensor_coalesced": _list_arg("self"),
    "all_gather_single_coalesced": _list_arg("self"),
    "reduce_scatter_tensor": _arg("self"),
    "reduce_scatter_tensor_autograd": _arg("self"),
    "reduce_scatter_single": _arg("self"),
    "reduce_scatter_single_autograd": _arg("self"),
    "reduce_scatter_tensor_coalesced": _list_arg("inputs"),
    "reduce_scatter_single_coalesced": _list_arg("inputs"),
    "all_to_all_single": _arg("self"),
    "all_to_all_single_autograd": _arg("self"),
}

DDP_BUCKET_OP = "ddp_bucket"

# Name under which an operation is recorded: point-to-point calls count as send/recv, blocking or not.
RECORDED_AS = {"isend": "send", "irecv": "recv"}

Interceptor = Callable[[str, int, Callable[[], Any]], Any]


def nbytes(tensors: torch.Tensor | Sequence[torch.Tensor]) -> int:
    """Payload bytes of a tensor or a sequence of tensors."""
    import torch

    if isinstance(tensors, torch.Tensor):
        return _nbytes(tensors)
    return _list_nbytes(list(tensors))


@dataclass
class OpStats:
    """Totals of one collective kind."""

    calls: int = 0
    bytes: int = 0
    blocked_s: float = 0.0


@dataclass(eq=False)  # identity: two counters with equal totals are still different counters
class CommCounter:
    """Accumulates what instrumented collectives report while this counter is active (thread-safe)."""

    ops: dict[str, OpStats] = field(default_factory=dict)
    intervals: list[tuple[float, float]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    thread: int | None = None  # with per-thread counting on: the thread whose calls it counts

    def record_call(self, op: str, nbytes: int, blocked_s: float) -> None:
        with self._lock:
            stats = self.ops.setdefault(op, OpStats())
            stats.calls += 1
            stats.bytes += nbytes
            stats.blocked_s += blocked_s

    def record_blocked(self, op: str, seconds: float) -> None:
        with self._lock:
            self.ops.setdefault(op, OpStats()).blocked_s += seconds

    def record_interval(self, start: float, end: float) -> None:
        with self._lock:
            self.intervals.append((start, end))

    def reset(self) -> None:
        with self._lock:
            self.ops.clear()
            self.intervals.clear()

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(s.bytes for s in self.ops.values())

    @property
    def bytes_by_op(self) -> dict[str, int]:
        """Bytes per recorded operation name (operations called with no payload show 0)."""
        with self._lock:
            return {op: s.bytes for op, s in self.ops.items()}

    @property
    def calls(self) -> int:
        with self._lock:
            return sum(s.calls for s in self.ops.values())

    @property
    def blocked_s(self) -> float:
        with self._lock:
            return sum(s.blocked_s for s in self.ops.values())

    @property
    def busy_s(self) -> float:
        """Length of the union of [issue, completion] intervals."""
        with self._lock:
            intervals = sorted(self.intervals)
        return union_length(intervals)


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by sorted (start, end) intervals, overlaps counted once."""
    total = 0.0
    cur_start: float | None = None
    cur_end = 0.0
    for start, end in intervals:
        if cur_start is None or start > cur_end:
            if cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_start is not None:
        total += cur_end - cur_start
    return total


class _Registry(threading.local):
    suppressed: bool = False


_local = _Registry()
_active: list[CommCounter] = []
_by_thread: dict[int, list[CommCounter]] = {}  # the active counters bound to a thread (counter.thread), by thread
_patches: list[torch_patches.Patch] = []  # installed by the first active counter, restored by the last
_INSTALLER = f"{__name__}.instrument_collectives"
_install_lock = threading.Lock()
_interceptor: Interceptor | None = None
_per_thread = False  # simulated ranks (threads of one process): a counter sees only its own thread's calls
_thread_interceptors: dict[int, Interceptor] = {}  # with _per_thread: each thread's interceptor


def set_per_thread(enabled: bool) -> bool:
    """Count each call only into the counters its own thread made (simulated ranks, each rank a thread);
    returns the previous setting."""
    global _per_thread
    previous, _per_thread = _per_thread, enabled
    _thread_interceptors.clear()
    return previous


def set_interceptor(interceptor: Interceptor | None) -> Interceptor | None:
    """Install ``interceptor`` for every later counted operation (``None`` removes it); returns the previous.
    With per-thread counting on, for the calling thread's operations only."""
    global _interceptor
    if _per_thread:
        here = threading.get_ident()
        previous = _thread_interceptors.pop(here, None)
        if interceptor is not None:
            _thread_interceptors[here] = interceptor
        return previous
    previous, _interceptor = _interceptor, interceptor
    return previous


def _current_interceptor() -> Interceptor | None:
    return _thread_interceptors.get(threading.get_ident()) if _per_thread else _interceptor


def issue(op: str, size: int, call: Callable[[], Any], group: Any = None) -> Any:
    """Count ``size`` bytes of ``op`` issued by another library's communication backend (DeepSpeed's
    ``deepspeed.comm``, Horovod) and run ``call`` through the interceptor; the ``torch.distributed`` calls
    it makes inside are not counted a second time. Nothing is counted in a group of one rank."""
    counters = _recording()
    interceptor = _current_interceptor()
    if not counters and interceptor is None:
        return call()
    size = size if _group_size(group) > 1 else 0
    start = now()
    with _suppressed():
        result = call() if interceptor is None else interceptor(op, size, call)
    end = now()
    for counter in counters:
        counter.record_call(op, size, end - start)
        counter.record_interval(start, end)
    return result


def account(op: str, size: int, group: Any = None) -> None:
    """Add ``size`` bytes of ``op`` issued out of Python's sight (e.g. DDP's C++ buffer broadcast) to the
    active counters; nothing is counted in a group of one rank."""
    counters = _recording()
    if not counters:
        return
    size = size if _group_size(group) > 1 else 0
    for counter in counters:
        counter.record_call(op, size, 0.0)


def _recording() -> list[CommCounter]:
    if _local.suppressed:
        return []
    if _per_thread:
        # a lookup, not a scan of every rank's counter: at 1024 simulated ranks that scan was 1024 a call
        return list(_by_thread.get(threading.get_ident(), ()))
    return list(_active)


@contextmanager
def _suppressed() -> Iterator[None]:
    previous = _local.suppressed
    _local.suppressed = True
    try:
        yield
    finally:
        _local.suppressed = previous


class _TimedWork:
    """Proxy of an asynchronous ``Work`` that records when the operation is seen to complete."""

    def __init__(self, work: Any, op: str, start: float, counters: list[CommCounter]) -> None:
        self._work = work
        self._op = op
        self._start = start
        self._counters = counters
        self._finished = False
        self._finish_lock = threading.Lock()

    def _finish(self, end: float) -> None:
        with self._finish_lock:
            if self._finished:
                return
            self._finished = True
        for counter in self._counters:
            counter.record_interval(self._start, end)

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        t0 = now()
        result = self._work.wait(*args, **kwargs)
        t1 = now()
        for counter in self._counters:
            counter.record_blocked(self._op, t1 - t0)
        self._finish(t1)
        return result

    def is_completed(self) -> bool:
        done = bool(self._work.is_completed())
        if done:
            self._finish(now())
        return done

    def get_future(self) -> Any:
        """A future chained after the completion record, so its ``wait()`` returns only once the interval
        is in every counter (a plain done-callback may still be running when ``wait()`` returns)."""

        def finished(future: Any) -> Any:
            self._finish(now())
            return future.value()

        return self._work.get_future().then(finished)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def _group_size(group: Any) -> int:
    import torch.distributed as dist

    return int(dist.get_world_size(group))


@functools.cache
def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature, read once: every counter's installation wraps the same functions again."""
    return inspect.signature(fn)


def _counting(
    op: str,
    original: Callable[..., Any],
    payload: Callable[[Mapping[str, Any]], int] | None = None,
    group_size: Callable[[Any], int] | None = None,
    recorded_as: str | None = None,
    timed_work: bool = True,
) -> Callable[..., Any]:
    """A counting wrapper of ``original`` (defaults: those of the ``torch.distributed`` collective ``op``).

    ``timed_work=False`` returns the result as is (a functional collective returns a tensor, whose own
    ``wait`` must not be proxied); its interval then ends when the call returns.
    """
    signature = _signature(original)
    payload_of = payload if payload is not None else PAYLOAD[op]
    size_of_group = group_size if group_size is not None else _group_size
    name = recorded_as if recorded_as is not None else RECORDED_AS.get(op, op)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        counters = _recording()
        if not counters:
            return original(*args, **kwargs)
        arguments = signature.bind(*args, **kwargs).arguments
        nbytes = payload_of(arguments) if size_of_group(arguments.get("group")) > 1 else 0
        interceptor = _current_interceptor()
        start = now()
        with _suppressed():  # a collective implemented through another one is counted once
            if interceptor is None:
                result = original(*args, **kwargs)
            else:
                result = interceptor(name, nbytes, lambda: original(*args, **kwargs))
        end = now()
        for counter in counters:
            counter.record_call(name, nbytes, end - start)
        if timed_work and result is not None and hasattr(result, "wait"):
            return _TimedWork(result, name, start, counters)
        for counter in counters:
            counter.record_interval(start, end)
        return result

    wrapper.__dict__["__dmlbench_original__"] = original  # marks it counted; :func:`original` unwraps it
    return wrapper


def _modules() -> list[Any]:
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    return [dist, c10d]


def _functional_module() -> Any:
    """``torch.distributed._functional_collectives``, or None where this torch has none."""
    try:
        import torch.distributed._functional_collectives as funcol
    except ImportError:
        return None
    return funcol


def _functional_group_size(group: Any) -> int:
    """Ranks in a functional collective's group (a process group, its name, ranks, a mesh or (mesh, dim))."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    if isinstance(group, str):  # a group's name: c10d's private resolver, not re-exported
        resolve: Callable[[Any], Any] = vars(c10d)["_resolve_process_group"]
        return int(dist.get_world_size(resolve(group)))
    return int(_functional_module()._expand_group(group)[2])


def original(op: str) -> Callable[..., Any]:
    """The uninstrumented ``torch.distributed`` function ``op`` (for the runner's own bookkeeping)."""
    import torch.distributed as dist

    fn: Callable[..., Any] = getattr(dist, op)
    unwrapped: Callable[..., Any] = getattr(fn, "__dmlbench_original__", fn)
    return unwrapped


def _install() -> None:
    for module in _modules():
        for op in PAYLOAD:
            current = getattr(module, op, None)
            if current is None or hasattr(current, "__dmlbench_original__"):
                continue
            _patches.append(torch_patches.install(module, op, _counting(op, current), by=_INSTALLER))
    funcol = _functional_module()
    if funcol is None:
        return
    for op, payload in FUNCTIONAL_PAYLOAD.items():
        current = getattr(funcol, op, None)
        if current is None or hasattr(current, "__dmlbench_original__"):
            continue
        wrapper = _counting(op, current, payload, _functional_group_size, op.removesuffix("_autograd"),
                            timed_work=False)
        _patches.append(torch_patches.install(funcol, op, wrapper, by=_INSTALLER))


def _uninstall() -> None:
    patches = list(_patches)
    _patches.clear()
    torch_patches.restore_all(patches)  # a case that replaced a counted function meanwhile is told here


@contextmanager
def instrument_collectives(counter: CommCounter | None = None) -> Iterator[CommCounter]:
    """Count collectives issued (by any thread) inside the block into ``counter`` (a new one by default).

    Blocks nest; each active counter sees every call. The functions are restored when the last one exits.
    """
    counter = counter if counter is not None else CommCounter()
    if _per_thread:
        counter.thread = threading.get_ident()
    with _install_lock:
        if not _active:
            _install()
        _active.append(counter)
        thread = counter.thread
        if thread is not None:
            _by_thread.setdefault(thread, []).append(counter)
    try:
        yield counter
    finally:
        with _install_lock:
            _active.remove(counter)
            if thread is not None:
                _by_thread[thread].remove(counter)
                if not _by_thread[thread]:
                    del _by_thread[thread]
            if not _active:
                _uninstall()


def _hook_group(state: Any) -> Any:
    """The process group of a DDP hook state: the group itself, None (world) or ``state.process_group``."""
    import torch.distributed as dist

    if state is None or isinstance(state, dist.ProcessGroup):
        return state
    return getattr(state, "process_group", None)


def counting_comm_hook(hook: Callable[[Any, Any], Any] | None = None) -> Callable[[Any, Any], Any]:
    """A DDP communication hook that counts bucket bytes and completion time, then runs ``hook``.

    ``hook`` defaults to ``allreduce_hook`` (same result as DDP without a hook). Register it as usual:
    ``ddp.register_comm_hook(state, counting_comm_hook(hook))``. Each bucket is recorded once, as op
    ``"ddp_bucket"`` with ``bucket.buffer()``'s bytes; collectives the inner hook issues are not counted a
    second time. Outside :func:`instrument_collectives` the hook only forwards.
    """
    if hook is None:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        hook = allreduce_hook
    inner = hook

    @functools.wraps(inner)
    def counted(state: Any, bucket: Any) -> Any:
        counters = _recording()
        if not counters:
            return inner(state, bucket)
        nbytes = _nbytes(bucket.buffer()) if _group_size(_hook_group(state)) > 1 else 0
        start = now()
        with _suppressed():
            future = inner(state, bucket)
        issued = now()
        for counter in counters:
            counter.record_call(DDP_BUCKET_OP, nbytes, issued - start)

        def done(finished: Any) -> Any:
            end = now()
            for counter in counters:
                counter.record_interval(start, end)
            return finished.value()

        # Chained rather than a done-callback: whoever waits on the returned future (DDP's reducer, the
        # case) resumes only after the interval is recorded.
        return future.then(done)

    return counted
