"""The hand-written optimisers are torch.optim's updates, operation for operation (without its import cost)."""

from __future__ import annotations

import pytest
import torch

from xorlib.learners._optim import SGD, Adam


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lr", [0.1, 3.0])
def test_adam_and_sgd_are_torch_optims_updates_bit_for_bit(dtype: torch.dtype, lr: float) -> None:
    gen = torch.Generator().manual_seed(7)
    start = torch.randn(3, 2, 5, generator=gen, dtype=dtype)
    # gradients of mixed scales and signs, some exactly zero (Adam's eps then decides the step)
    grads = [
        torch.randn(3, 2, 5, generator=gen, dtype=dtype) * 10.0 ** torch.randint(-9, 3, (1,)).item() for _ in range(60)
    ]
    grads[5][0] = 0.0
    for ours_class, theirs_class in ((Adam, torch.optim.Adam), (SGD, torch.optim.SGD)):
        ours, theirs = start.clone(), torch.nn.Parameter(start.clone())
        mine, stock = ours_class(ours, lr=lr), theirs_class([theirs], lr=lr)
        for grad in grads:
            mine.step(grad)
            theirs.grad = grad.clone()
            stock.step()
            assert torch.equal(ours, theirs.detach()), ours_class.__name__
        assert not torch.equal(ours, start)  # the updates did move the parameter
