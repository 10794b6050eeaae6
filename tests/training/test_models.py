"""The model zoo: output shapes, deterministic initialisation, the CIFAR ResNet stem."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.training import models


def params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize(
    ("name", "kwargs", "inputs", "out_shape"),
    [
        ("mlp", {}, torch.randn(4, 32), (4, 10)),
        ("cnn", {}, torch.randn(4, 3, 32, 32), (4, 10)),
        ("bn_cnn", {}, torch.randn(4, 3, 8, 8), (4, 10)),
        ("resnet18", {}, torch.randn(2, 3, 32, 32), (2, 10)),
        ("unet", {"num_classes": 3}, torch.randn(2, 3, 16, 16), (2, 3, 16, 16)),
        ("transformer", {}, torch.randint(0, 64, (4, 16)), (4, 2)),
    ],
    ids=["mlp", "cnn", "bn_cnn", "resnet18", "unet", "transformer"],
)
def test_output_shape(name: str, kwargs: dict[str, int], inputs: torch.Tensor, out_shape: tuple[int, ...]) -> None:
    model = models.build_model(name, **kwargs)
    assert tuple(model(inputs).shape) == out_shape


@pytest.mark.parametrize("name", ["mlp", "cnn", "unet", "transformer"])
def test_same_seed_same_weights_other_seed_other_weights(name: str) -> None:
    torch.manual_seed(1)
    first = params(models.build_model(name, seed=3))
    torch.manual_seed(2)  # the global generator must not matter
    assert torch.equal(first, params(models.build_model(name, seed=3)))
    assert not torch.equal(first, params(models.build_model(name, seed=4)))


def test_builders_leave_the_global_generator_alone() -> None:
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    models.tiny_mlp(seed=0)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("builder", [models.resnet18, models.resnet50], ids=["resnet18", "resnet50"])
def test_resnet_has_cifar_stem(builder: object) -> None:
    model = builder()  # type: ignore[operator]
    stem = model[0]
    assert isinstance(stem, nn.Conv2d)
    assert stem.kernel_size == (3, 3) and stem.stride == (1, 1)
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.modules())
    assert model[-1].out_features == 10


def test_resnet50_forward_on_cifar_sized_input() -> None:
    model = models.resnet50().eval()
    with torch.no_grad():
        assert tuple(model(torch.randn(1, 3, 32, 32)).shape) == (1, 10)


def test_transformer_has_no_dropout() -> None:
    model = models.small_transformer()
    model.train()
    tokens = torch.randint(0, 64, (2, 16))
    assert torch.equal(model(tokens), model(tokens))


def test_unknown_model_names_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"unknown model 'vgg'; available: .*resnet18"):
        models.build_model("vgg")
