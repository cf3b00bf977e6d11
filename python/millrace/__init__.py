"""millrace from Python: datasets fed to a training loop by millrace's C loader.

    import millrace
    ds = millrace.Dataset("data/train")          # a dataset directory (millrace data ingest)
    ld = ds.loader(batch_size=256, shuffle=True, seed=7, epoch=0, threads=2)
    for batch in ld:                              # dict: column name -> numpy array (or list)
        x = batch["x"]                            # no copy: the array reads the batch's memory
    state = ld.state()                            # {"epoch": 0, "batch": 12, ...}
    ld = ds.loader(batch_size=256, shuffle=True, seed=7, resume=state)   # continues exactly

Fixed-width columns (int64, float64, float32, bool, date as int32 days,
timestamp as int64 microseconds, decimal as its unscaled int64) are numpy
arrays over the batch's own memory, read-only; a column with nulls in the
batch is a numpy.ma.MaskedArray (mask True where null). String columns are
lists of str, binary columns lists of bytes (None for null). The order of
rows is a pure function of (dataset, options, seed, epoch): the same at any
thread count, and resumable at any batch. With rank and world_size each rank
reads its contiguous slice of that order, all slices of one length (docs/data.md). Errors are millrace.Error, with
millrace's message (file, row, column).
"""
import numpy as _np

from . import _millrace
from ._millrace import Error

__all__ = ["Dataset", "Loader", "Error", "version"]
version = _millrace.version


class Dataset:
    """A millrace dataset directory: schema, row count, shards; .loader() reads it."""

    def __init__(self, path):
        self.path = str(path)
        info = _millrace.dataset_info(self.path)
        self.num_rows = info["rows"]
        self.num_shards = info["shards"]
        self.schema = [(n, t, k) for n, t, k in info["schema"]]  # (name, type, kind)

    @property
    def columns(self):
        return [n for n, _, _ in self.schema]

    def __len__(self):
        return self.num_rows

    def __repr__(self):
        return "millrace.Dataset(%r: %d rows, %d columns, %d shards)" % (
            self.path, self.num_rows, len(self.schema), self.num_shards)

    def loader(self, batch_size=1024, columns=None, filter=None, shuffle=False, seed=0, epoch=0,
               start_batch=0, threads=0, prefetch=0, drop_last=False, shuffle_buffer=0, rank=0, world_size=1,
               resume=None):
        return Loader(self.path, batch_size=batch_size, columns=columns, filter=filter, shuffle=shuffle,
                      seed=seed, epoch=epoch, start_batch=start_batch, threads=threads, prefetch=prefetch,
                      drop_last=drop_last, shuffle_buffer=shuffle_buffer, rank=rank, world_size=world_size,
                      resume=resume)


def _masked(col, bits, n):
    valid = _np.unpackbits(_np.frombuffer(bits, dtype=_np.uint8), bitorder="little")[:n].astype(bool)
    return _np.ma.MaskedArray(col, mask=~valid)


class Loader:
    """An iterator of batches (dicts of numpy arrays and lists); see the module's doc."""

    def __init__(self, path, batch_size=1024, columns=None, filter=None, shuffle=False, seed=0, epoch=0,
                 start_batch=0, threads=0, prefetch=0, drop_last=False, shuffle_buffer=0, rank=0, world_size=1,
                 resume=None):
        if resume is not None:
            epoch = resume["epoch"]
            start_batch = resume["batch"]
            seed = resume.get("seed", seed)
            rank = resume.get("rank", rank)
            world_size = resume.get("world_size", world_size)
        self._opts = dict(path=str(path), batch_size=batch_size, columns=None if columns is None else list(columns),
                          filter=filter, shuffle=bool(shuffle), seed=seed, epoch=epoch, threads=threads,
                          prefetch=prefetch, drop_last=bool(drop_last), shuffle_buffer=shuffle_buffer, rank=rank,
                          world_size=world_size)
        self._start = start_batch
        self._ld = _millrace.Loader(self._opts["path"], batch_size, self._opts["columns"], filter, bool(shuffle),
                                    seed, epoch, start_batch, threads, prefetch, bool(drop_last), shuffle_buffer,
                                    rank, world_size)

    def __iter__(self):
        return self

    def __next__(self):
        b = next(self._ld)
        valid = b.pop("__valid__", None)
        out = {}
        for name, v in b.items():
            if isinstance(v, list):
                out[name] = v
                continue
            a = _np.asarray(v)
            if valid is not None and name in valid:
                a = _masked(a, valid[name], len(a))
            out[name] = a
        return out

    def state(self):
        """Where the loader is: pass it as resume= to continue with the next batch."""
        return {"epoch": self._opts["epoch"], "batch": self._start + self._ld.batches, "seed": self._opts["seed"],
                "batch_size": self._opts["batch_size"], "rank": self._opts["rank"],
                "world_size": self._opts["world_size"]}

    def stats(self):
        """input_bound_fraction (time waiting / total), wait and total seconds, batches, rows, samples_per_second."""
        s = self._ld.stats()
        s["samples_per_second"] = s["rows"] / s["total_seconds"] if s["total_seconds"] > 0 else 0.0
        return s

    def close(self):
        self._ld.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
