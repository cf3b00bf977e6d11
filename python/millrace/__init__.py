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
reads its contiguous slice of that order, all slices of one length (docs/data.md).

Images: decode={"column": "image", "format": "auto"} with one of resize=(h, w),
center_crop=size (after resize=shorter side, an int), random_resized_crop=
{"size": [224, 224], "scale": [0.08, 1.0], "ratio": [0.75, 1.333]}, and hflip=p,
output="uint8" (N, H, W, 3) or "float32" (N, 3, H, W) with normalize={"mean":
[...], "std": [...]}; on_error="skip" makes an undecodable image zeros, counted.
The decoded batch is one array over the loader's memory. Errors are millrace.Error, with
millrace's message (file, row, column).
"""
import json as _json
import os

import numpy as _np

from . import _millrace
from ._millrace import Error

__all__ = ["Dataset", "Loader", "Bundle", "Error", "stage_loader", "stage_loader_options", "log_metric", "log_params",
           "flush", "version"]
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
               resume=None, shapes=None, **image):
        return Loader(self.path, batch_size=batch_size, columns=columns, filter=filter, shuffle=shuffle,
                      seed=seed, epoch=epoch, start_batch=start_batch, threads=threads, prefetch=prefetch,
                      drop_last=drop_last, shuffle_buffer=shuffle_buffer, rank=rank, world_size=world_size,
                      resume=resume, shapes=shapes, **image)


def _jsonable(v):
    """numpy scalars and arrays in loader options, as JSON numbers and lists."""
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError("loader option value %r is not a number, string, list or dict" % (v,))


def _masked(col, bits, n):
    valid = _np.unpackbits(_np.frombuffer(bits, dtype=_np.uint8), bitorder="little")[:n].astype(bool)
    return _np.ma.MaskedArray(col, mask=~valid)


class Loader:
    """An iterator of batches (dicts of numpy arrays and lists); see the module's doc."""

    def __init__(self, path, batch_size=1024, columns=None, filter=None, shuffle=False, seed=0, epoch=0,
                 start_batch=0, threads=0, prefetch=0, drop_last=False, shuffle_buffer=0, rank=0, world_size=1,
                 resume=None, shapes=None, **image):
        tensors = None
        if shapes:  # {column: (shape, dtype)}: binary columns of raw fixed-size tensors
            tensors = {k: (tuple(int(x) for x in sh), _np.dtype(dt).char) for k, (sh, dt) in shapes.items()}
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
        # One parser reads these and a millrace.yaml `loaders:` entry (C: mr_loader_spec_parse).
        opts = dict(self._opts, start_batch=start_batch, **{k: v for k, v in image.items() if v is not None})
        del opts["path"]
        self._ld = _millrace.Loader(self._opts["path"], _json.dumps(opts, default=_jsonable), tensors)

    def __iter__(self):
        return self

    def columns(self):
        """The next batch with its fixed-width columns as millrace Column objects (buffer protocol
        and __dlpack__: torch.from_dlpack(col) shares the memory), strings as lists."""
        return next(self._ld)

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

    def image_params(self, index, width, height):
        """The random crop box (x, y, w, h) and flip of the sample at position index of the epoch."""
        return self._ld.image_params(index, width, height)

    def next_into(self, out):
        """The next batch copied into arrays or tensors the caller allocated (pinned memory, say):
        out maps column names to arrays of at least the batch's length (numpy arrays, or CPU torch
        tensors through .numpy()); returns the batch's row count. Other columns are dropped."""
        b = next(self)
        n = None
        for name, dst in out.items():
            src = b[name]
            a = dst.numpy() if hasattr(dst, "numpy") and not isinstance(dst, _np.ndarray) else dst
            n = len(src)
            _np.copyto(a[:n], _np.ma.getdata(src) if isinstance(src, _np.ndarray) else _np.asarray(src),
                       casting="same_kind")
        return n

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


def stage_loader_options(name):
    """The options of loader `name` declared under the running exec stage's `loaders:` in
    millrace.yaml (a dict of Loader keywords plus "dataset", the dataset's path), as the engine
    checked them when the spec loaded and resolved ${stages.X} to paths."""
    path = os.environ.get("MILLRACE_LOADERS_FILE")
    if not path:
        raise Error("millrace.stage_loader reads the loaders: of a running exec stage (millrace run sets "
                    "MILLRACE_LOADERS_FILE); this process is not one")
    with open(path) as f:
        loaders = _json.load(f)
    if name not in loaders:
        raise Error("the stage declares no loader %r under loaders: (it declares: %s)"
                    % (name, ", ".join(sorted(loaders)) or "none"))
    return dict(loaders[name])


def stage_loader(name, **overrides):
    """A Loader over loader `name` of the running exec stage's `loaders:` (millrace.yaml), with
    keywords given here (epoch, resume, rank, world_size, ...) replacing the declared ones."""
    o = stage_loader_options(name)
    o.update(overrides)
    return Loader(o.pop("dataset"), **o)


class Bundle:
    """A model bundle (millrace.yaml's package op): Bundle(path).predict(...) gives the scores
    millrace predict and millrace serve give, with the same preprocessing. path may be a
    registry URI, models:/NAME@ALIAS, models:/NAME/VERSION or models:/NAME (the latest),
    resolved in the workspace at or above the current directory (docs/registry.md)."""

    def __init__(self, path):
        self._b = _millrace.Bundle(str(path))
        self.inputs = self._b.inputs          # [(name, type, categorical, required)]
        self.outputs = self._b.outputs        # ["prediction"] or ["prediction_0", ...]
        self.version = self._b.version

    def predict(self, data, raw=False):
        """data: a path (CSV, TSV, JSON lines, Parquet, a dataset), a dict of columns (numpy
        arrays or lists; None for missing), or a list of row dicts. Returns a float64 array:
        (n,) for one output, (n, k) for k. raw=True: margins instead of probabilities."""
        if isinstance(data, (str, os.PathLike)):
            buf, k = self._b.predict_file(os.fspath(data), bool(raw))
        else:
            if isinstance(data, list):
                names = []
                for row in data:
                    names.extend(n for n in row if n not in names)
                data = {n: [row.get(n) for row in data] for n in names}
            n = None
            cols = {}
            for name, v in data.items():
                col = _as_column(v)
                if n is None:
                    n = len(col[1])
                elif len(col[1]) != n:
                    raise ValueError("column %r has %d values, the first had %d" % (name, len(col[1]), n))
                cols[name] = col
            buf, k = self._b.predict_columns(cols, n or 0, bool(raw))
        a = _np.frombuffer(buf, dtype=_np.float64)
        return a if k == 1 else a.reshape(-1, k)


def _as_column(v):
    """("f", float64 array, null mask or None) for numbers, ("s", [str or None]) for the rest."""
    if isinstance(v, _np.ma.MaskedArray):
        return "f", _np.ascontiguousarray(v.filled(0), dtype=_np.float64), _np.ma.getmaskarray(v).astype(_np.uint8).tobytes()
    if isinstance(v, _np.ndarray) and v.dtype.kind in "biuf":
        return "f", _np.ascontiguousarray(v, dtype=_np.float64), None
    v = list(v)
    if all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in v):
        mask = bytes(x is None for x in v)
        return "f", _np.array([0.0 if x is None else x for x in v], dtype=_np.float64), mask if any(mask) else None
    return "s", [None if x is None else (x if isinstance(x, str) else str(x)) for x in v]


# ---- metrics from inside an exec stage ---------------------------------------------------
# The engine sets MILLRACE_LOG_FILE for an exec stage's commands; records are kept in memory and
# appended in batches (every 1,000 records or 2 seconds, and at exit), so logging never waits on
# the disk in the training loop. The stage records them when its commands end.

import atexit as _atexit
import math as _math
import time as _time

_log = {"records": [], "last": 0.0, "steps": {}}


def _log_file():
    path = os.environ.get("MILLRACE_LOG_FILE")
    if not path:
        raise Error("millrace.log_metric and log_params record into a running exec stage "
                    "(millrace run sets MILLRACE_LOG_FILE); this process is not one")
    return path


def flush():
    """Appends the records logged so far to the stage's log file."""
    if not _log["records"]:
        return
    with open(_log_file(), "a") as f:
        f.write("".join(_json.dumps(r) + "\n" for r in _log["records"]))
    _log["records"] = []
    _log["last"] = _time.monotonic()


def _add(rec):
    _log["records"].append(rec)
    if len(_log["records"]) >= 1000 or _time.monotonic() - _log["last"] > 2.0:
        flush()


def log_metric(name, value, step=None):
    """Records metric `name` at `step` (default: one more than its last step, from 0) in the
    current run, as a curve when steps vary (millrace show, compare, the report)."""
    _log_file()
    value = float(value)
    if not name or not _math.isfinite(value):
        raise ValueError("log_metric needs a name and a finite value, got %r=%r" % (name, value))
    if step is None:
        step = _log["steps"].get(name, -1) + 1
    _log["steps"][name] = int(step)
    _add({"metric": str(name), "value": value, "step": int(step)})


def log_params(params):
    """Records a dict of params: numbers as metrics params.NAME, other values in the stage log."""
    _log_file()
    for k, v in params.items():
        _add({"param": str(k), "value": v if isinstance(v, (int, float, str, bool)) or v is None else str(v)})


@_atexit.register
def _flush_at_exit():
    if _log["records"] and os.environ.get("MILLRACE_LOG_FILE"):
        flush()
