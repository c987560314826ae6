"""DistributedSampler: each of `num_replicas` processes sees its own share of the dataset."""
import math
import numbers

import numpy as np

from ... import distributed as dist
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """The indices of replica `rank` out of `num_replicas`, as torch: every replica gets
    `num_samples` indices, the list padded by repeating its start (or cut, with drop_last) so
    it divides evenly. With shuffle=True every replica permutes with seed + epoch, so the shares
    partition one permutation; call set_epoch(epoch) before each epoch for a new order.

    num_replicas and rank default to the process group's world size and rank
    (cltensor.distributed.init_process_group); without a process group give them explicitly.

    Example:
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            if not dist.is_initialized():
                raise ValueError("DistributedSampler: no process group is initialized; call "
                                 "cltensor.distributed.init_process_group() or give "
                                 "num_replicas and rank explicitly")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, numbers.Integral) \
                or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive int, got "
                             f"{num_replicas}")
        if not isinstance(rank, numbers.Integral) or not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, int(seed), drop_last, 0
        n = len(dataset)
        if drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def _order(self):
        n = len(self.dataset)
        if not self.shuffle:
            return list(range(n))
        # one seed for every replica: the same permutation everywhere
        return np.random.default_rng([self.seed & (2**64 - 1), self.epoch]).permutation(n).tolist()

    def __iter__(self):
        indices = self._order()
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        assert len(indices) == self.total_size, "padding gave the wrong length"
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Set the epoch, which together with the seed fixes the shuffled order."""
        self.epoch = epoch
