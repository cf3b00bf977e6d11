"""millrace.torch.Loader: a torch.utils.data.IterableDataset over a millrace dataset.

    from millrace.torch import Loader
    loader = Loader("data/train", batch_size=256, shuffle=True, seed=7, columns=["x", "y"])
    for epoch in range(10):
        loader.set_epoch(epoch)
        for batch in loader:                 # dict of torch tensors (strings stay lists)
            ...

Loader.from_stage("train") takes its options from the running exec stage's
`loaders:` in millrace.yaml (checked when the spec loads, part of the key).
It yields whole batches (millrace batches in its threads): give it to
torch.utils.data.DataLoader with batch_size=None, or iterate it directly.
With rank and world_size (torch.distributed's), each rank reads its own
slice of the epoch, every rank the same number of batches.
Tensors share the batch's memory (torch.from_numpy, no copy; read-only
memory, so torch warns once if asked to write).
"""
import warnings

import torch as _torch

from . import Dataset, stage_loader_options


class Loader(_torch.utils.data.IterableDataset):
    def __init__(self, path, batch_size=1024, columns=None, filter=None, shuffle=False, seed=0, epoch=0,
                 threads=0, prefetch=0, drop_last=False, shuffle_buffer=0, rank=0, world_size=1, **image):
        super().__init__()
        self.dataset = Dataset(path)
        self.kw = dict(batch_size=batch_size, columns=columns, filter=filter, shuffle=shuffle, seed=seed,
                       threads=threads, prefetch=prefetch, drop_last=drop_last, shuffle_buffer=shuffle_buffer,
                       rank=rank, world_size=world_size, **image)
        self.epoch = epoch
        self.resume = None

    @classmethod
    def from_stage(cls, name, **overrides):
        """The loader `name` declared under the running exec stage's `loaders:` (millrace.yaml),
        with keywords given here replacing the declared ones."""
        o = stage_loader_options(name)
        o.update(overrides)
        return cls(o.pop("dataset"), **o)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        kw = dict(self.kw, epoch=self.epoch)
        ld = self.dataset.loader(resume=self.resume, **kw) if self.resume else self.dataset.loader(**kw)
        self.resume = None
        self.last = ld
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            for b in ld:
                yield {k: (v if isinstance(v, list) else _torch.from_numpy(v.filled(0) if hasattr(v, "mask") else v))
                       for k, v in b.items()}

    def state(self):
        return self.last.state()

    def load_state(self, state):
        self.epoch = state["epoch"]
        self.resume = state
