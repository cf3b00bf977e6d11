"""Writes Fashion-MNIST (Debian's dataset-fashion-mnist) as one PNG per sample:
OUT/{train,test}/CLASS/NNNNN.png. Takes the first per_class_train / per_class_test samples of
each class (params data.*; MILLRACE_SMOKE=1: 60 and 20)."""
import gzip
import json
import os
import sys

import numpy as np
from PIL import Image

SRC = "/usr/share/datasets/fashion-mnist"
CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]


def load(kind):
    with gzip.open(os.path.join(SRC, "%s-images-idx3-ubyte.gz" % kind)) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(os.path.join(SRC, "%s-labels-idx1-ubyte.gz" % kind)) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images, labels


def main(out):
    params = json.load(open(os.environ["MILLRACE_PARAMS_FILE"]))["data"]
    smoke = os.environ.get("MILLRACE_SMOKE") == "1"
    for split, kind, key, small in (("train", "train", "per_class_train", 60), ("test", "t10k", "per_class_test", 20)):
        images, labels = load(kind)
        keep = small if smoke else int(params[key])
        count = [0] * 10
        for i, (img, y) in enumerate(zip(images, labels)):
            if count[y] >= keep:
                continue
            count[y] += 1
            d = os.path.join(out, split, CLASSES[y])
            os.makedirs(d, exist_ok=True)
            Image.fromarray(img).save(os.path.join(d, "%05d.png" % i))
        print("%s: %d PNG files" % (split, sum(count)))


if __name__ == "__main__":
    main(sys.argv[1])
