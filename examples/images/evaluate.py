"""Test accuracy of the trained CNN on the packed test shards, written as metrics JSON."""
import json
import os
import sys

import torch

from millrace.torch import Loader
from train_cnn import CLASSES, net

model_dir, out = sys.argv[1:3]
model = net()
model.load_state_dict(torch.load(os.path.join(model_dir, "cnn.pt")))
model.eval()
correct = n = 0
with torch.no_grad():
    for b in Loader.from_stage("test"):  # the stage's loaders: test in millrace.yaml
        y = torch.tensor([CLASSES.index(c) for c in b["label"]])
        correct += (model(b["image"]).argmax(1) == y).sum().item()
        n += len(y)
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump({"test": {"accuracy": correct / n, "samples": n}}, open(out, "w"))
print("test accuracy %.4f on %d images" % (correct / n, n))
