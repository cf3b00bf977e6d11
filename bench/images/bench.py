"""bench/images (see run.sh): generation and the timed runs."""
import os
import resource
import subprocess
import sys
import time

import numpy as np

BATCH = 256


def gen(out, n):
    from PIL import Image
    rng = np.random.default_rng(13)
    yy, xx = np.mgrid[0:384, 0:512].astype(np.float32)
    for i in range(n):
        d = os.path.join(out, "c%02d" % (i % 10))
        os.makedirs(d, exist_ok=True)
        f = rng.random(6).astype(np.float32)  # smooth gradients and waves, with noise: photo-like entropy
        img = np.stack([128 + 100 * np.sin(xx * f[0] * 0.05 + yy * f[1] * 0.03),
                        128 + 100 * np.cos(yy * f[2] * 0.04 + f[3] * 6),
                        128 + 100 * np.sin((xx + yy) * f[4] * 0.02 + f[5] * 6)], axis=2)
        img += rng.normal(0, 12, img.shape).astype(np.float32)
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(os.path.join(d, "%06d.jpg" % i), quality=90)


def millrace_epoch(ds, threads, dct=True, png=False):
    import millrace
    t0 = time.perf_counter()
    geometry = dict(resize=(28, 28)) if png else dict(random_resized_crop=[224, 224], hflip=0.5)
    ld = millrace.Dataset(ds).loader(batch_size=BATCH, shuffle=True, seed=1, threads=threads, columns=["image", "label"],
                                     decode={"column": "image", "dct_scale": dct}, **geometry)
    n, first = 0, None
    for b in ld:
        if first is None:
            first = time.perf_counter() - t0
        n += len(b["label"])
    return n, time.perf_counter() - t0, first


def dataloader_epoch(files, workers, png=False):
    import torch
    import torchvision
    from torchvision import transforms as T
    tf = T.Compose([T.Grayscale(3), T.PILToTensor()]) if png else \
        T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(files, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers)
    t0 = time.perf_counter()
    n, first = 0, None
    for x, y in dl:
        if first is None:
            first = time.perf_counter() - t0
        n += len(y)
    return n, time.perf_counter() - t0, first


def child(what, *args):
    """Runs one measurement in a fresh process: its own peak RSS."""
    out = subprocess.run([sys.executable, __file__, what, *map(str, args)], check=True, capture_output=True, text=True)
    return [float(v) for v in out.stdout.split()]


def cnn_input_bound(ds):
    import torch
    import millrace
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 5, stride=4), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, stride=2),
                              torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    ld = millrace.Dataset(ds).loader(batch_size=64, shuffle=True, seed=2, threads=1, columns=["image", "label"],
                                     decode="image", random_resized_crop=[224, 224], hflip=0.5, output="float32",
                                     normalize={"mean": [0.5] * 3, "std": [0.25] * 3})
    classes = {}
    for b in ld:
        x = torch.from_numpy(b["image"])
        y = torch.tensor([classes.setdefault(c, len(classes)) for c in b["label"]])
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return ld.stats()["input_bound_fraction"]


def example_input_bound(ds):
    """The images example's training loop (examples/images/train_cnn.py: its CNN, its loader
    options, batch 128, 2 torch threads, 2 loader threads, bfloat16 autocast where native) for one
    epoch over the Fashion-MNIST shards: the loader's input-bound fraction, the issue's target."""
    import torch
    import millrace
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "images"))
    from train_cnn import CLASSES, bf16_native, net
    torch.set_num_threads(2)
    torch.manual_seed(7)
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    autocast = bf16_native()
    ld = millrace.Dataset(ds).loader(batch_size=128, columns=["image", "label"], filter="hash(path) % 10 != 0",
                                     shuffle=True, seed=7, threads=2, decode="image", resize=[28, 28],
                                     output="float32", normalize={"mean": [0.286] * 3, "std": [0.353] * 3})
    for b in ld:
        x, y = torch.from_numpy(b["image"]), torch.tensor([CLASSES.index(c) for c in b["label"]])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return ld.stats()["input_bound_fraction"]


def run_png(files, ds):
    """The 70,000 Fashion-MNIST PNGs (28 x 28), decoded to uint8 batches: no augmentation."""
    import millrace
    n = len(millrace.Dataset(ds))
    m2 = child("mp", ds, 2)
    d2 = child("dp", files, 2)
    assert int(m2[0]) == n and int(d2[0]) == n, (m2, d2, n)
    print(f"{'Fashion-MNIST PNGs, 28 x 28, batch 256':52} {'samples/s':>10} {'first batch s':>14} {'peak RSS MB':>12}")
    for name, r in (("millrace loader, 2 threads", m2), ("torch DataLoader, 2 workers, Pillow", d2)):
        print(f"{name:52} {r[0] / r[1]:10.0f} {r[2]:14.3f} {r[3]:12.0f}")
    return (m2[0] / m2[1]) / (d2[0] / d2[1])


def run(files, ds, png_files=None, png_ds=None):
    import millrace
    n = len(millrace.Dataset(ds))
    # correctness first: every image once per epoch, batches of 224 x 224 x 3
    b = next(millrace.Dataset(ds).loader(batch_size=8, decode="image", random_resized_crop=[224, 224]))
    assert b["image"].shape == (8, 224, 224, 3), b["image"].shape
    got, _, _ = millrace_epoch(ds, 2)
    assert got == n, (got, n)
    print(f"validated: {n} images, batches of 224x224x3 uint8")
    rows = []
    m2 = child("m", ds, 2, 1)
    d2 = child("d", files, 2)
    m1 = child("m", ds, 1, 1)
    m1f = child("m", ds, 1, 0)
    m8 = child("m", ds, 8, 1)
    print(f"{'what':52} {'samples/s':>10} {'first batch s':>14} {'peak RSS MB':>12} {'per CPU-s':>10}")
    for name, r in (("millrace loader, 2 threads", m2), ("torch DataLoader, 2 workers, Pillow + torchvision", d2),
                    ("millrace loader, 1 thread (+ the consumer helping)", m1),
                    ("millrace, 1 thread, full-size JPEG decode", m1f), ("millrace loader, 8 threads", m8)):
        per = f"{r[0] / r[4]:10.0f}" if len(r) > 4 else ""
        print(f"{name:52} {r[0] / r[1]:10.0f} {r[2]:14.3f} {r[3]:12.0f} {per}")
    # Per core: images per CPU-second of the process (the consumer decodes the batch it waits
    # for, so one loader thread can use two cores: wall time would overstate it).
    per_core, per_core_full = m1[0] / m1[4], m1f[0] / m1f[4]
    jib = cnn_input_bound(ds)
    print(f"input-bound fraction feeding a small CNN on the 224 x 224 JPEG crops (1 torch thread, 1 loader "
          f"thread): {jib:.3f}")
    png = f" png_vs_dataloader={run_png(png_files, png_ds):.2f}" if png_ds else ""
    ib = child("ib", png_ds)[0] if png_ds else float("nan")
    print(f"input-bound fraction of the images example's training loop (Fashion-MNIST CNN, one epoch): {ib:.4f}")
    print(f"load: {os.getloadavg()[0]:.2f} (1-minute average at the end)")
    print(f"RESULT images vs_dataloader={(m2[0] / m2[1]) / (d2[0] / d2[1]):.2f} jpeg_per_core={per_core:.0f} "
          f"dct_gain={per_core / per_core_full:.2f} input_bound={ib:.4f}{png} jpeg_cnn_input_bound={jib:.3f}")


def cpu_s():
    """CPU seconds of this process, all its threads (user + system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 + \
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2], int(sys.argv[3]))
    elif cmd == "run":
        run(*sys.argv[2:6])
    elif cmd == "ib":
        print(example_input_bound(sys.argv[2]))
    elif cmd == "mp":
        n, t, first = millrace_epoch(sys.argv[2], int(sys.argv[3]), png=True)
        print(n, t, first, rss_mb())
    elif cmd == "dp":
        n, t, first = dataloader_epoch(sys.argv[2], int(sys.argv[3]), png=True)
        print(n, t, first, rss_mb())
    elif cmd == "m":
        c0 = cpu_s()
        n, t, first = millrace_epoch(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1")
        print(n, t, first, rss_mb(), cpu_s() - c0)
    elif cmd == "d":
        n, t, first = dataloader_epoch(sys.argv[2], int(sys.argv[3]))
        print(n, t, first, rss_mb())
