"""gloo's argument checks, made on the calling simulated rank before it joins a collective.

gloo checks a call's arguments (list lengths, tensor sizes and types, root ranks, reductions a dtype cannot
take) when the call is made, and raises ``RuntimeError`` on the rank that made it; torch's Python front end
makes the checks common to every backend itself (mixed dtypes, ``scatter_list`` on a non-source rank, a send
to oneself), so those already agree. Each function here raises what ``ProcessGroupGloo`` raises, with its
message as gloo words it (gloo's log prefix ``[rank0]:[F... ProcessGroupGloo.cpp:N]`` aside), before the rank
arrives at the collective: a bad call never leaves the other members waiting for a part that cannot fit.
Checked side by side with gloo in ``tests/world/simulated/test_gloo_semantics.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

# The C++ names gloo's messages give dtypes (caffe2's TypeMeta names)
_CPP_NAMES = {
    torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16",
    torch.int64: "long int", torch.int32: "int", torch.int16: "short int", torch.int8: "signed char",
    torch.uint8: "unsigned char", torch.bool: "bool", torch.complex64: "c10::complex<float>",
    torch.complex128: "c10::complex<double>",
}
_BITWISE = ("BAND", "BOR", "BXOR")


def _dtype(dtype: torch.dtype) -> str:
    return _CPP_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def _shape(tensor: torch.Tensor) -> str:
    return f"({', '.join(str(d) for d in tensor.shape)})"


def _options(tensor: torch.Tensor) -> str:
    return (f"TensorOptions(dtype={_dtype(tensor.dtype)}, device={tensor.device}, layout=Strided, "
            "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))")


def root(name: str, rank: int, size: int) -> None:
    """broadcast, reduce, scatter, gather: the root is a rank of the group."""
    if not 0 <= rank < size:
        raise RuntimeError(f"ProcessGroupGloo::{name}: invalid root rank: {rank}")


def reduction(op: str, tensors: Sequence[torch.Tensor]) -> None:
    """A bitwise reduction takes integral tensors only."""
    if op in _BITWISE and any(t.is_floating_point() or t.is_complex() for t in tensors):
        raise RuntimeError(f"Cannot use ReduceOp.{op} with non-integral dtype")


def _same_type_and_size(name: str, expected: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
    for index, tensor in enumerate(tensors):
        if tensor.dtype != expected.dtype:
            raise RuntimeError(f"ProcessGroupGloo::{name}: invalid tensor type at index {index} "
                               f"(expected {_options(expected)}, got {_options(tensor)})")
        if tensor.shape != expected.shape:
            raise RuntimeError(f"ProcessGroupGloo::{name}: invalid tensor size at index {index} "
                               f"(expected {_shape(expected)}, got {_shape(tensor)})")


def allgather(outputs: Sequence[torch.Tensor], inp: torch.Tensor, size: int) -> None:
    """``all_gather``: one output per member, each the input's type and size."""
    if len(outputs) != size:
        raise RuntimeError(f"ProcessGroupGloo::allgather: invalid output tensor list at index 0 "
                           f"(expected length {size}, got {len(outputs)})")
    _same_type_and_size("allgather", inp, outputs)


def allgather_into(output: torch.Tensor, inp: torch.Tensor, size: int) -> None:
    """``all_gather_into_tensor``: gloo splits the output into ``size`` chunks along dim 0 and checks them as
    ``all_gather``'s outputs."""
    if (output.dtype == inp.dtype and output.dim() == inp.dim() > 0 and inp.shape[0] > 0
            and output.shape[0] == size * inp.shape[0] and output.shape[1:] == inp.shape[1:]):
        return  # every chunk is the input's type and size: no need to cut ``size`` views (1024 a call at 1024 ranks)
    allgather(output.chunk(size) if output.dim() else [output], inp, size)


def reduce_scatter_into(output: torch.Tensor, inp: torch.Tensor, size: int) -> None:
    """``reduce_scatter_tensor``: the same dtype, the input ``size`` outputs long along dim 0."""
    if output.dtype != inp.dtype:
        raise RuntimeError(f"Check failed: outputTensors[i].dtype() == inputTensors[i].dtype() "
                           f"({_dtype(output.dtype)} vs. {_dtype(inp.dtype)}). ")
    if output.dim() and inp.dim() and output.shape[0] * size != inp.shape[0]:
        raise RuntimeError(f"Check failed: outputShape[0] * worldSize == inputShape[0] "
                           f"({output.shape[0] * size} vs. {inp.shape[0]}). ")
    for out_dim, in_dim in zip(output.shape[1:], inp.shape[1:], strict=False):
        if out_dim != in_dim:
            raise RuntimeError(f"Check failed: outputShape[i] == inputShape[i] ({out_dim} vs. {in_dim}). ")


def reduce_scatter(output: torch.Tensor, inputs: Sequence[torch.Tensor], size: int) -> None:
    """``reduce_scatter``: one input per member, each the output's size."""
    if len(inputs) != size:
        raise RuntimeError("invalid input tensor list size, must be world size")
    for inp in inputs:
        if inp.shape != output.shape:
            raise RuntimeError(f"Check failed: outputs[0].sizes().vec() == inputs[0][i].sizes().vec() "
                               f"({' '.join(map(str, output.shape))} vs. {' '.join(map(str, inp.shape))}). ")


def alltoall(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], size: int) -> None:
    """``all_to_all``: one input and one output per member, of the same size pairwise."""
    for kind, tensors in (("input", inputs), ("output", outputs)):
        if len(tensors) != size:
            raise RuntimeError(f"ProcessGroupGloo::alltoall: {kind} tensor list size {len(tensors)} does not "
                               f"match world size {size}")
    for out, inp in zip(outputs, inputs, strict=True):
        if out.shape != inp.shape:
            raise RuntimeError("ProcessGroupGloo::alltoall: input and output tensors must have the same size")


def alltoall_single(output: torch.Tensor, inp: torch.Tensor, output_splits: Sequence[int],
                    input_splits: Sequence[int], size: int) -> None:
    """``all_to_all_single``: splits (or equal parts) that cover each tensor's dim 0."""
    for tensor, splits in ((output, output_splits), (inp, input_splits)):
        rows = tensor.shape[0] if tensor.dim() else 1
        if not splits:
            if rows % size:
                raise RuntimeError("Tensor's dim 0 does not divide equally across group size")
        elif len(splits) != size:
            raise RuntimeError("Number of tensor splits not equal to group size")
        elif sum(splits) != rows:
            raise RuntimeError("Split sizes doesn't match total dim 0 size")
    if not output_splits and not input_splits and output.numel() != inp.numel():
        raise RuntimeError("in->size == out->size. ")


def scatter(inputs: Sequence[torch.Tensor], output: torch.Tensor, size: int) -> None:
    """``scatter`` on the source: one input per member, each the output's type and size."""
    if len(inputs) != size:
        raise RuntimeError(f"ProcessGroupGloo::scatter: Incorrect input list size {len(inputs)}. Input list size "
                           f"should be {size}, same as size of the process group.")
    _same_type_and_size("scatter", output, inputs)


def gather(outputs: Sequence[torch.Tensor], inp: torch.Tensor, size: int) -> None:
    """``gather`` on the destination: one output per member, each the input's type and size."""
    if len(outputs) != size:
        raise RuntimeError(f"ProcessGroupGloo::gather: Incorrect output list size {len(outputs)}. Output list "
                           f"size should be {size}, same as size of the process group.")
    _same_type_and_size("gather", inp, outputs)
