"""The per-case state guard: what a case commonly changes in a rank process is put back after it.

Runs on ranks only (no pytest import). :func:`snapshot` records the state before a case body;
:meth:`StateSnapshot.restore` puts it back afterwards and returns what the case had changed. Guarded:
autograd grad mode, inference mode, autograd's multithreading switch, anomaly detection, default
dtype and device, intra-op and inter-op thread counts, deterministic-algorithm settings (torch's switch,
warn-only, fill of uninitialised memory, cuDNN deterministic/benchmark, float32 matmul precision), the
environment, the working directory, the public functions of ``torch.distributed`` and
``torch.distributed.distributed_c10d`` (a case that replaced ``dist.all_reduce`` gets the original back), and
the patches of torch installed through ``measure/torch_patches.py``: one installed after the snapshot and
still on afterwards (a ``with instrument_collectives()`` left open, say) is taken off, newest first, and
named with its installer. Patches installed before the snapshot (the adopting ``init_process_group``, the
point-to-point accounting) are meant to stay.

Not guarded: other module attributes, ``sys.path``/``sys.modules``, warning filters, signal handlers,
global state of C extensions and CUDA contexts; cases that change those ask for ``isolation="fresh"``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.errors import PatchConflict
from pytest_dmlbench.measure import torch_patches

# Inference-mode guards opened to leave an inference mode a case entered and never exited; they must stay
# alive (destroying one would re-enter the mode it replaced).
_INFERENCE_EXITS: list[Any] = []


class Unrestorable(Exception):
    """State the guard cannot put back in this process; the world has to be rebuilt."""


@dataclass(frozen=True)
class _Setting:
    name: str
    get: Callable[[], Any]
    set: Callable[[Any], None]


def _leave_inference_mode(enabled: bool) -> None:
    import torch

    if enabled:
        raise Unrestorable("the case exited an inference mode that was active before it")
    _INFERENCE_EXITS.append(torch._C._InferenceMode(False))


def _set_interop_threads(count: int) -> None:
    import torch

    try:
        torch.set_num_interop_threads(count)
    except RuntimeError as exc:
        raise Unrestorable(f"the inter-op thread count cannot be set back to {count}: {exc}") from exc


@functools.cache
def _settings() -> tuple[_Setting, ...]:
    import torch

    def set_anomaly(value: tuple[bool, bool]) -> None:
        torch.set_anomaly_enabled(*value)

    def set_deterministic(value: tuple[bool, bool]) -> None:
        torch.use_deterministic_algorithms(value[0], warn_only=value[1])

    def set_fill(value: bool) -> None:
        torch.utils.deterministic.fill_uninitialized_memory = value  # type: ignore[attr-defined]

    def set_cudnn(value: tuple[bool, bool]) -> None:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = value

    cudnn = torch.backends.cudnn
    # Inference mode first: leaving it sets grad mode, which the grad-mode entry then restores.
    return (
        _Setting("inference mode", torch.is_inference_mode_enabled, _leave_inference_mode),
        _Setting("grad mode", torch.is_grad_enabled, torch._C._set_grad_enabled),
        _Setting("autograd multithreading", torch._C._is_multithreading_enabled,
                 torch._C._set_multithreading_enabled),
        _Setting("anomaly detection", lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
                 set_anomaly),
        _Setting("default dtype", torch.get_default_dtype, torch.set_default_dtype),
        _Setting("default device", lambda: str(torch.get_default_device()), torch.set_default_device),
        _Setting("intra-op threads", torch.get_num_threads, torch.set_num_threads),
        _Setting("inter-op threads", torch.get_num_interop_threads, _set_interop_threads),
        _Setting("deterministic algorithms",
                 lambda: (torch.are_deterministic_algorithms_enabled(),
                          torch.is_deterministic_algorithms_warn_only_enabled()),
                 set_deterministic),
        _Setting("fill of uninitialised memory",
                 lambda: bool(torch.utils.deterministic.fill_uninitialized_memory),  # type: ignore[attr-defined]
                 set_fill),
        _Setting("cuDNN deterministic/benchmark", lambda: (cudnn.deterministic, cudnn.benchmark), set_cudnn),
        _Setting("float32 matmul precision", torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    )


def _public_functions(attributes: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in attributes.items() if not name.startswith("_") and callable(value)}


def _unchanged(current: dict[str, Any], saved: dict[str, Any]) -> bool:
    """The quick check (dict equality compares identical values by identity, in C); False when unsure."""
    try:
        return bool(current == saved)
    except (TypeError, ValueError, RuntimeError):  # a case stored an object whose == cannot answer
        return False


def _modules() -> tuple[Any, ...]:
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    return (dist, c10d)


@dataclass
class StateSnapshot:
    """The guarded state at one moment, and the means to put it back."""

    values: dict[str, Any]
    raw_environ: dict[Any, Any]
    cwd: str
    functions: list[tuple[Any, dict[str, Any]]]  # each module with a copy of its attributes
    patches: tuple[torch_patches.Patch, ...] = ()  # installed through torch_patches at the snapshot

    def restore(self) -> list[str]:
        """Put everything back; returns what had changed. Raises :class:`Unrestorable` (after restoring all
        the rest) when something cannot be put back in this process."""
        changed: list[str] = []
        problems: list[str] = []
        for setting in _settings():
            before = self.values[setting.name]
            if setting.get() != before:
                changed.append(setting.name)
                try:
                    setting.set(before)
                except Unrestorable as exc:
                    problems.append(f"{setting.name}: {exc}")
        changed.extend(self._restore_environment())
        if _cwd() != self.cwd:
            changed.append("working directory")
            os.chdir(self.cwd)
        changed.extend(self._take_off_patches())  # before the functions: a patch's original is what goes back
        for module, attributes in self.functions:
            if _unchanged(vars(module), attributes):
                continue
            for name, function in _public_functions(attributes).items():
                if getattr(module, name, None) is not function:
                    changed.append(f"{module.__name__}.{name}")
                    setattr(module, name, function)
        if problems:
            raise Unrestorable("; ".join(problems))
        return changed

    def _take_off_patches(self) -> list[str]:
        installed = torch_patches.installed()
        if installed == self.patches:
            return []
        kept = {id(patch) for patch in self.patches}
        left = [patch for patch in installed if id(patch) not in kept]
        found = []
        for patch in reversed(left):
            try:
                torch_patches.restore(patch)
                found.append(f"{patch.where} (patched by {patch.installer}, not restored)")
            except PatchConflict:
                now = torch_patches.describe(patch.current())
                torch_patches.take_off(patch)
                found.append(f"{patch.where} (patched by {patch.installer}, not restored, then replaced by {now})")
        return found

    def _restore_environment(self) -> list[str]:
        if _raw_environ() == self.raw_environ:
            return []
        saved = {os.fsdecode(name): os.fsdecode(value) for name, value in self.raw_environ.items()}
        current = dict(os.environ)
        for name in current.keys() - saved.keys():
            del os.environ[name]
        names = sorted(current.keys() - saved.keys())
        for name, value in saved.items():
            if current.get(name) != value:
                os.environ[name] = value
                names.append(name)
        return [f"environment variable {name}" for name in sorted(names)]


def _raw_environ() -> dict[Any, Any]:
    """A copy of the environment as cheap as possible: CPython's encoded mapping behind ``os.environ``
    (copied in C, no decoding), or a plain copy elsewhere."""
    raw = getattr(os.environ, "_data", None)
    return dict(raw) if isinstance(raw, dict) else dict(os.environ)


def _cwd() -> str | None:
    """The working directory, or None when a case removed it."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def snapshot() -> StateSnapshot:
    """Record the guarded state now (before a case body)."""
    return StateSnapshot(
        values={setting.name: setting.get() for setting in _settings()},
        raw_environ=_raw_environ(),
        cwd=os.getcwd(),  # the rank's own directory exists: it was restored after the last case
        functions=[(module, dict(vars(module))) for module in _modules()],
        patches=torch_patches.installed(),
    )


def warm_up() -> None:
    """Build the list of guarded settings once (in the zygote, so that every forked rank inherits it)."""
    _settings()
