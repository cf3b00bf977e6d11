"""bench/images on an accelerator (issue 13): the images example's CNN trained for one epoch on
the Fashion-MNIST PNGs, fed once by millrace's loader over the packed shards and once by torch's
DataLoader over the individual files (ImageFolder, Pillow, num_workers = the cores), on the same
device, in one process each after the other; samples/s and the GPU's utilisation while each
trains (nvidia-smi sampled every 100 ms, mean over the epoch).

    /usr/bin/python3 bench/images/gpu.py PNG_DIR SHARDS [--device cuda|cpu] [--limit N]

PNG_DIR holds one folder per class (bench/images/run.sh writes it as $DATA/fashion_png/all,
and its shards as $DATA/fashion_png/ds). --device cpu runs the same code without a GPU
(utilisation is then reported as -1): that is how the suite-free check of this script runs.
Last line: RESULT images_gpu millrace_util=<%> dataloader_util=<%> millrace_sps=<samples/s>
dataloader_sps=<samples/s> sps_ratio=<millrace / DataLoader>."""
import argparse
import os
import subprocess
import sys
import threading
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "images"))
from train_cnn import CLASSES, net  # noqa: E402  the example's model and classes

MEAN, STD = 0.286, 0.353


class Util:
    """nvidia-smi's utilization.gpu, sampled every 100 ms while running."""

    def __init__(self, enabled):
        self.samples, self.proc, self.enabled = [], None, enabled

    def __enter__(self):
        if self.enabled:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                          "-lms", "100"], stdout=subprocess.PIPE, text=True)
            self.thread = threading.Thread(target=self._read, daemon=True)
            self.thread.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.samples.append(float(line.split(",")[0]))
            except ValueError:
                pass

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()

    def mean(self):
        return sum(self.samples) / len(self.samples) if self.samples else -1.0


def train(batches, device, limit):
    torch.manual_seed(7)
    model = net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    n, t0 = 0, time.perf_counter()
    for x, y in batches:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        n += len(y)
        if limit and n >= limit:
            break
    if device.type == "cuda":
        torch.cuda.synchronize()
    return n, time.perf_counter() - t0


def millrace_batches(shards, threads):
    import millrace
    ld = millrace.Dataset(shards).loader(batch_size=128, columns=["image", "label"], shuffle=True, seed=7,
                                         threads=threads, decode="image", resize=[28, 28], output="float32",
                                         normalize={"mean": [MEAN] * 3, "std": [STD] * 3})
    for b in ld:
        yield torch.from_numpy(b["image"]), torch.tensor([CLASSES.index(c) for c in b["label"]])


def dataloader_batches(png_dir, workers):
    import torchvision
    from torchvision import transforms as T
    tf = T.Compose([T.Grayscale(3), T.ToTensor(), T.Normalize([MEAN] * 3, [STD] * 3)])
    ds = torchvision.datasets.ImageFolder(png_dir, transform=tf)
    idx = [CLASSES.index(c) for c in ds.classes]  # folder order -> the example's class numbers
    dl = torch.utils.data.DataLoader(ds, batch_size=128, shuffle=True, num_workers=workers, pin_memory=True,
                                     persistent_workers=False)
    for x, y in dl:
        yield x, torch.tensor([idx[int(v)] for v in y])


def main():
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")  # read-only batch memory
    ap = argparse.ArgumentParser()
    ap.add_argument("png_dir")
    ap.add_argument("shards")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--limit", type=int, default=0, help="stop each epoch after this many samples (0: all)")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench/images/gpu.py: no CUDA device (torch.cuda.is_available() is False); --device cpu to check "
                 "the script without one")
    device = torch.device(a.device)
    cores = len(os.sched_getaffinity(0))
    gpu = device.type == "cuda"
    results = {}
    for name, batches in (("millrace", lambda: millrace_batches(a.shards, cores)),
                          ("dataloader", lambda: dataloader_batches(a.png_dir, cores))):
        with Util(gpu) as u:
            n, secs = train(batches(), device, a.limit)
        results[name] = (n / secs, u.mean())
        print(f"{name:12} {n} samples in {secs:.2f} s: {n / secs:,.0f} samples/s, GPU utilisation "
              f"{u.mean():.1f}%" if gpu else f"{name:12} {n} samples in {secs:.2f} s: {n / secs:,.0f} samples/s")
    (ms, mu), (ds, du) = results["millrace"], results["dataloader"]
    print(f"device: {torch.cuda.get_device_name(0) if gpu else 'cpu'}, {cores} cores")
    print(f"RESULT images_gpu millrace_util={mu:.1f} dataloader_util={du:.1f} millrace_sps={ms:.0f} "
          f"dataloader_sps={ds:.0f} sps_ratio={ms / ds:.2f}")


if __name__ == "__main__":
    main()
