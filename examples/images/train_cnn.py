"""Trains a small CNN on the packed training shards through millrace.torch.Loader, with the
loaders the stage declares in millrace.yaml (loaders: train, valid): the loader decodes the PNGs, normalizes them to float32 NCHW and hands whole batches to the loop without a
copy. One file in ten (by a hash of its path) is the validation set; training stops when the validation
loss has not improved for `patience` epochs. Loss and accuracy are logged per step with
millrace.log_metric, and the loader's input-bound fraction per epoch. bfloat16 autocast when the
CPU has native bfloat16 (avx512_bf16 / amx_bf16)."""
import json
import os
import sys
import time

import torch

import millrace
from millrace.torch import Loader

CLASSES = ["bag", "boot", "coat", "dress", "pullover", "sandal", "shirt", "sneaker", "t-shirt", "trouser"]


def net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def bf16_native():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def targets(labels):
    return torch.tensor([CLASSES.index(c) for c in labels])


def main(out):
    p = json.load(open(os.environ["MILLRACE_PARAMS_FILE"]))["train"]
    smoke = os.environ.get("MILLRACE_SMOKE") == "1"
    torch.manual_seed(p["seed"])
    torch.set_num_threads(max(1, int(os.environ.get("MILLRACE_THREADS", "1"))))
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=p["lr"], momentum=0.9)
    autocast = bf16_native()
    train = Loader.from_stage("train")
    valid = Loader.from_stage("valid")
    best, stale, step = float("inf"), 0, 0
    epochs = 2 if smoke else p["epochs"]
    for epoch in range(epochs):
        train.set_epoch(epoch)
        model.train()
        t0 = time.perf_counter()
        for b in train:
            x, y = b["image"], targets(b["label"])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                logits = model(x)
                loss = torch.nn.functional.cross_entropy(logits.float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            millrace.log_metric("train.loss", loss.item(), step)
            millrace.log_metric("train.accuracy", (logits.argmax(1) == y).float().mean().item(), step)
            step += 1
        millrace.log_metric("train.input_bound", train.last.stats()["input_bound_fraction"], epoch)
        model.eval()
        total, n = 0.0, 0
        with torch.no_grad():
            for b in valid:
                y = targets(b["label"])
                total += torch.nn.functional.cross_entropy(model(b["image"]), y, reduction="sum").item()
                n += len(y)
        vloss = total / max(n, 1)
        millrace.log_metric("valid.loss", vloss, epoch)
        print("epoch %d: valid loss %.4f, %.1fs" % (epoch, vloss, time.perf_counter() - t0))
        if vloss < best - 1e-4:
            best, stale = vloss, 0
            os.makedirs(out, exist_ok=True)
            torch.save(model.state_dict(), os.path.join(out, "cnn.pt"))
        else:
            stale += 1
            if stale > p["patience"]:
                print("plateau: stopping after epoch %d" % epoch)
                break
    millrace.log_params({"autocast_bf16": int(autocast), "epochs_run": epoch + 1})


if __name__ == "__main__":
    main(sys.argv[1])
