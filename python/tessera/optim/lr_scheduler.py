"""tessera.optim.lr_scheduler: the C++ schedulers over a Python optimizer's C++ optimizer."""
from tessera._C import _optim


class LRScheduler:
    def __init__(self, optimizer, cxx):
        self.optimizer = optimizer
        self._cxx = cxx

    def step(self):
        self._cxx.step()

    def get_last_lr(self):
        return list(self._cxx.get_last_lr())

    @property
    def last_epoch(self):
        return self._cxx.last_epoch


class StepLR(LRScheduler):
    def __init__(self, optimizer, step_size, gamma=0.1):
        super().__init__(optimizer, _optim.StepLR(optimizer._cxx, step_size, gamma))


class MultiStepLR(LRScheduler):
    def __init__(self, optimizer, milestones, gamma=0.1):
        super().__init__(optimizer, _optim.MultiStepLR(optimizer._cxx, list(milestones), gamma))


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma):
        super().__init__(optimizer, _optim.ExponentialLR(optimizer._cxx, gamma))


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0):
        super().__init__(optimizer, _optim.CosineAnnealingLR(optimizer._cxx, T_max, eta_min))


class LinearLR(LRScheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5):
        super().__init__(optimizer, _optim.LinearLR(optimizer._cxx, start_factor, end_factor, total_iters))
