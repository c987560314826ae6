"""torch.utils.data's names: datasets, samplers, collation and the DataLoader."""
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset,
                      Subset, TensorDataset, random_split)
from .distributed import DistributedSampler
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)
from .worker import WorkerInfo, get_worker_info

__all__ = ["DataLoader", "Dataset", "IterableDataset", "TensorDataset", "ConcatDataset",
           "ChainDataset", "Subset", "StackDataset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DistributedSampler", "default_collate", "default_convert",
           "WorkerInfo", "get_worker_info"]
