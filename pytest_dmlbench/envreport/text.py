"""The environment report as text for people."""

from __future__ import annotations

from typing import Any

from pytest_dmlbench.results.units import format_quantity


def _yes(flag: object) -> str:
    return "yes" if flag else "no"


def render_text(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "pytest-dmlbench environment",
        f"  machine key      {report['machine_key']}",
        f"  CPU              {m.get('cpu_model')} ({m.get('logical_cores')} logical, "
        f"{m.get('physical_cores')} physical cores; {format_quantity(m.get('cpu_mhz'), 'MHz')})",
        f"  memory           {m.get('memory_gib')} GiB total, {m.get('available_memory_gib')} GiB available",
        f"  OS               {m.get('platform') or (str(m.get('os')) + ' ' + str(m.get('kernel')))}",
        f"  Python           {m.get('python')}",
        f"  torch            {m.get('torch')} (torchvision {m.get('torchvision') or 'not installed'})",
        f"  CUDA             {m.get('cuda') or 'not built'}; cuDNN {m.get('cudnn') or '-'}; "
        f"NCCL {m.get('nccl') or '-'}",
    ]
    gpus = m.get("gpu_details") or []
    if gpus:
        lines += [f"  GPU {g['index']}            {g['name']}, {g['memory_gb']} GB, compute capability "
                  f"{g['capability']}" for g in gpus]
    else:
        lines.append("  GPUs             none visible")
    backends = m.get("backends_available") or {}
    lines.append("  backends         " + ", ".join(f"{name} {_yes(ok)}" for name, ok in backends.items()))
    lines.append(f"  default backend  {m.get('backend')} (what --dmlbench-backend auto picks for 2 ranks)")
    variables = m.get("distributed_env") or {}
    lines.append("  variables        " + ("none of MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, "
                                        "OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES, NCCL_*, GLOO_*, "
                                        "TORCH_DISTRIBUTED_DEBUG is set" if not variables else ""))
    lines += [f"    {name}={value}" for name, value in variables.items()]
    check = report.get("live_check")
    if check is None:
        lines.append("  live check       skipped (--no-live)")
    elif check["ok"]:
        lines.append(
            f"  live check       OK: {check['world_size']}-rank {check['backend']} world on loopback "
            f"({check['start_method']}ed) up and done in {format_quantity(check['start_s'], 's')} "
            f"(init_process_group {format_quantity(check['init_s'], 's')}, first all_reduce "
            f"{format_quantity(check['all_reduce_s'], 's')}); {check['detail']}"
        )
    else:
        lines.append(f"  live check       FAILED ({check['start_method']}): {check['detail']}")
    return "\n".join(lines)
