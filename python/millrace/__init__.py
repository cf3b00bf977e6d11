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
import numpy as _np

from . import _millrace
from ._millrace import Error, image_params as _image_params

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
               resume=None, **image):
        return Loader(self.path, batch_size=batch_size, columns=columns, filter=filter, shuffle=shuffle,
                      seed=seed, epoch=epoch, start_batch=start_batch, threads=threads, prefetch=prefetch,
                      drop_last=drop_last, shuffle_buffer=shuffle_buffer, rank=rank, world_size=world_size,
                      resume=resume, **image)


_FORMATS = {"auto": 0, "jpeg": 1, "png": 2}
_IMAGE_KEYS = ("decode", "resize", "center_crop", "random_resized_crop", "hflip", "normalize", "output", "on_error")


def _pair(v, what):
    if isinstance(v, int):
        return v, v
    v = tuple(v)
    if len(v) != 2:
        raise ValueError("%s: expected a size or [height, width]" % what)
    return int(v[0]), int(v[1])


def _image(decode=None, resize=None, center_crop=None, random_resized_crop=None, hflip=0.0, normalize=None,
           output="uint8", on_error="fail"):
    """The C loader's image options from the Python keywords (docs/python.md, Images)."""
    if decode is None:
        if any(v is not None for v in (resize, center_crop, random_resized_crop, normalize)) or hflip:
            raise ValueError("resize, crops, hflip and normalize need decode={'column': ...}")
        return None
    if isinstance(decode, str):
        decode = {"column": decode}
    fmt = decode.get("format", "auto")
    if fmt not in _FORMATS:
        raise ValueError("decode format must be jpeg, png or auto, got %r" % (fmt,))
    d = {"column": decode.get("column", "image"), "format": _FORMATS[fmt], "hflip": float(hflip or 0)}
    if random_resized_crop is not None:
        r = random_resized_crop if isinstance(random_resized_crop, dict) else {"size": random_resized_crop}
        d["geometry"] = 3
        d["out_h"], d["out_w"] = _pair(r["size"], "random_resized_crop")
        if "scale" in r:
            d["scale"] = tuple(r["scale"])
        if "ratio" in r:
            d["ratio"] = tuple(r["ratio"])
        if resize is not None or center_crop is not None:
            raise ValueError("random_resized_crop sets the output size: no resize or center_crop with it")
    elif center_crop is not None:
        d["geometry"] = 2
        d["out_h"], d["out_w"] = _pair(center_crop, "center_crop")
        if resize is not None:
            if not isinstance(resize, int):
                raise ValueError("with center_crop, resize is the shorter side's length (an int)")
            d["resize_shorter"] = resize
    elif resize is not None:
        d["geometry"] = 1
        d["out_h"], d["out_w"] = _pair(resize, "resize")
    else:
        raise ValueError("decode needs one output size: resize, center_crop or random_resized_crop")
    if output not in ("uint8", "float32"):
        raise ValueError("output must be uint8 (N, H, W, 3) or float32 (N, 3, H, W), got %r" % (output,))
    d["to_float"] = int(output == "float32")
    if normalize is not None:
        if output != "float32":
            raise ValueError("normalize goes with output='float32'")
        d["mean"] = tuple(normalize["mean"])
        d["std"] = tuple(normalize["std"])
    if on_error not in ("fail", "skip"):
        raise ValueError("on_error must be fail or skip, got %r" % (on_error,))
    d["skip_errors"] = int(on_error == "skip")
    d["dct_scale"] = int(decode.get("dct_scale", True))
    return d


def _masked(col, bits, n):
    valid = _np.unpackbits(_np.frombuffer(bits, dtype=_np.uint8), bitorder="little")[:n].astype(bool)
    return _np.ma.MaskedArray(col, mask=~valid)


class Loader:
    """An iterator of batches (dicts of numpy arrays and lists); see the module's doc."""

    def __init__(self, path, batch_size=1024, columns=None, filter=None, shuffle=False, seed=0, epoch=0,
                 start_batch=0, threads=0, prefetch=0, drop_last=False, shuffle_buffer=0, rank=0, world_size=1,
                 resume=None, **image):
        bad = set(image) - set(_IMAGE_KEYS)
        if bad:
            raise TypeError("unknown loader option(s): %s" % ", ".join(sorted(bad)))
        self.image = _image(**image)
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
                                    rank, world_size, self.image)

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

    def image_params(self, index, width, height):
        """The random crop box (x, y, w, h) and flip of the sample at position index of the epoch."""
        return _image_params(self.image, self._opts["seed"], self._opts["epoch"], index, width, height)

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
