"""The Python package (python/millrace) under the suite, with Debian's numpy and torch:
values equal to the data written, numeric arrays over the batch's own memory (checked by
address, numpy and torch), memory returned as batches are released (no growth over 10,000
batches), resume and thread count leave the sequence unchanged, errors map to millrace.Error,
no reference leaks. Run: MILLRACE_BIN=build/millrace PYTHONPATH=build/python python3 this."""
import gc
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import millrace

BIN = os.environ["MILLRACE_BIN"]


def ingest(src, out, *args):
    subprocess.run([BIN, "data", "ingest", src, out, *args], check=True, stdout=subprocess.DEVNULL)


def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.n = 5000
        with open(os.path.join(d, "t.csv"), "w") as f:
            f.write("id,x,f,name,flag\n")
            for i in range(cls.n):
                x = "" if i % 7 == 3 else "%.3f" % (i * 0.25)
                f.write("%d,%s,%d.5,n%d,%s\n" % (i, x, i % 10, i % 13, "true" if i % 2 else "false"))
        cls.ds = os.path.join(d, "ds")
        ingest(os.path.join(d, "t.csv"), cls.ds, "--row-group-rows", "700", "--rows-per-shard", "2000")
        os.makedirs(os.path.join(d, "files", "a"))
        for i in range(20):
            with open(os.path.join(d, "files", "a", "%02d.bin" % i), "wb") as f:
                f.write(bytes(range(i)) + b"\0\xff")
        cls.fds = os.path.join(d, "fds")
        subprocess.run([BIN, "data", "ingest", "--files", os.path.join(d, "files"), cls.fds, "--label-from",
                        "parent-dir"], check=True, stdout=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_dataset_info(self):
        ds = millrace.Dataset(self.ds)
        self.assertEqual(len(ds), self.n)
        self.assertEqual(ds.num_shards, 3)
        self.assertEqual(ds.columns, ["id", "x", "f", "name", "flag"])
        self.assertEqual(ds.schema[1][1], "float64")

    def test_values(self):
        ids, xs, names, flags = [], [], [], []
        for b in millrace.Dataset(self.ds).loader(batch_size=333):
            self.assertEqual(b["id"].dtype, np.int64)
            self.assertEqual(b["flag"].dtype, np.bool_)
            ids.extend(b["id"].tolist())
            x = b["x"]
            xs.extend([None if m else v for v, m in zip(np.ma.getdata(x).tolist(), np.ma.getmaskarray(x).tolist())])
            names.extend(b["name"])
            flags.extend(b["flag"].tolist())
        self.assertEqual(ids, list(range(self.n)))
        self.assertEqual(xs, [None if i % 7 == 3 else round(i * 0.25, 3) for i in range(self.n)])
        self.assertEqual(names, ["n%d" % (i % 13) for i in range(self.n)])
        self.assertEqual(flags, [bool(i % 2) for i in range(self.n)])

    def test_binary_files(self):
        b = next(iter(millrace.Dataset(self.fds).loader(batch_size=100)))
        self.assertEqual(b["path"][3], "a/03.bin")
        self.assertEqual(b["image"][3], bytes(range(3)) + b"\0\xff")
        self.assertEqual(b["label"], ["a"] * 20)

    def test_zero_copy(self):
        import torch
        ld = millrace.Dataset(self.ds).loader(batch_size=1000, columns=["id", "f"])
        b = next(ld)
        for name in ("id", "f"):
            a = b[name]
            col = a.base.obj if isinstance(a.base, memoryview) else a.base
            self.assertEqual(type(col).__name__, "Column")
            self.assertEqual(a.__array_interface__["data"][0], col.address, "numpy reads the batch's memory")
            self.assertFalse(a.flags.writeable)
            self.assertEqual(torch.from_numpy(a).data_ptr(), col.address, "and so does torch")
            t = torch.from_dlpack(col)
            self.assertEqual(t.data_ptr(), col.address, "DLPack: the same memory")
            self.assertEqual(t.tolist(), a.tolist())
        raw = ld.columns()  # Column objects: DLPack directly
        t = torch.from_dlpack(raw["id"])
        self.assertEqual(t.data_ptr(), raw["id"].address)
        del raw
        self.assertEqual(int(t[0]) + 1, int(t[1]), "the tensor keeps the batch alive after the dict is gone")

    def test_memory_returns(self):
        ds = millrace.Dataset(self.ds)
        count, base = 0, None
        while count < 10000:
            for b in ds.loader(batch_size=8, columns=["id", "x", "name"], threads=2):
                count += 1
                if count == 1000:
                    gc.collect()
                    base = rss_kb()
                if count == 10000:
                    break
        gc.collect()
        grown = rss_kb() - base
        self.assertLess(grown, 16 * 1024, "RSS grew by %d KiB over 9,000 batches" % grown)

    def test_resume_and_threads(self):
        ds = millrace.Dataset(self.ds)
        def seq(**kw):
            return [b["id"].tolist() for b in ds.loader(batch_size=128, shuffle=True, seed=11, epoch=2, **kw)]
        full = seq(threads=1)
        self.assertEqual(sorted(sum(full, [])), list(range(self.n)))
        self.assertNotEqual(sum(full, []), list(range(self.n)), "shuffled")
        self.assertEqual(seq(threads=2), full, "the thread count does not change the sequence")
        ld = ds.loader(batch_size=128, shuffle=True, seed=11, epoch=2)
        head = [next(ld)["id"].tolist() for _ in range(7)]
        state = ld.state()
        self.assertEqual(state["batch"], 7)
        ld.close()
        rest = [b["id"].tolist() for b in ds.loader(batch_size=128, shuffle=True, resume=state)]
        self.assertEqual(head + rest, full, "interrupted at batch 7 and resumed: the same epoch")

    def test_ranks(self):
        ds = millrace.Dataset(self.ds)
        whole = sum((b["id"].tolist() for b in ds.loader(batch_size=100, shuffle=True, seed=4)), [])
        for w in (1, 2, 4):
            parts = [sum((b["id"].tolist() for b in ds.loader(batch_size=100, shuffle=True, seed=4, rank=r,
                                                              world_size=w)), []) for r in range(w)]
            self.assertEqual(len({len(p) for p in parts}), 1, "equal slices")
            self.assertEqual(sum(parts, []), whole, "in rank order the slices are the whole epoch")
        ld = ds.loader(batch_size=100, shuffle=True, seed=4, rank=1, world_size=4)
        next(ld)
        st = ld.state()
        self.assertEqual((st["rank"], st["world_size"], st["batch"]), (1, 4, 1))
        rest = sum((b["id"].tolist() for b in ds.loader(batch_size=100, shuffle=True, resume=st)), [])
        self.assertEqual(rest, whole[1250 + 100:2500], "a rank resumes its own slice")

    def test_errors(self):
        with self.assertRaises(millrace.Error) as e:
            millrace.Dataset(os.path.join(self.tmp.name, "missing"))
        self.assertIn("missing", str(e.exception))
        with self.assertRaises(millrace.Error) as e:
            millrace.Dataset(self.ds).loader(filter="nosuch > 1")
        self.assertIn("nosuch", str(e.exception))
        with self.assertRaises(ValueError):
            millrace.Dataset(self.ds).loader(batch_size=0)
        self.assertTrue(issubclass(millrace.Error, RuntimeError))

    def test_stage_loader(self):
        """An exec stage's loaders: in millrace.yaml reach millrace.stage_loader and
        millrace.torch.Loader.from_stage with the declared options (the batches equal a Loader
        given the same keywords); keywords given in the script replace declared ones; outside a
        stage, a clear error; a bad keyword is a ValueError carrying millrace's message."""
        ws = os.path.join(self.tmp.name, "ws")
        os.makedirs(ws)
        ingest(os.path.join(self.tmp.name, "t.csv"), os.path.join(ws, "ds"), "--row-group-rows", "700")
        script = os.path.join(ws, "read.py")
        with open(script, "w") as f:
            f.write("import json, millrace, millrace.torch\n"
                    "a = [b['id'].tolist() for b in millrace.stage_loader('train')]\n"
                    "b = [b['id'].tolist() for b in millrace.stage_loader('train', epoch=1)]\n"
                    "c = [t['id'].tolist() for t in millrace.torch.Loader.from_stage('train')]\n"
                    "json.dump({'a': a, 'b': b, 'c': c, 'opts': millrace.stage_loader_options('train')},"
                    " open('ids.json', 'w'))\n")
        with open(os.path.join(ws, "millrace.yaml"), "w") as f:
            f.write("stages:\n  read:\n    op: exec\n    cmd: %s read.py\n    deps: [read.py, %s]\n"
                    "    outs: [ids.json]\n    loaders:\n      train:\n        dataset: %s\n"
                    "        batch_size: 300\n        shuffle: true\n        seed: 11\n"
                    "        filter: id %% 3 = 0\n        columns: [id]\n" % (sys.executable, "ds", "ds"))
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(millrace.__file__)))
        subprocess.run([BIN, "run"], cwd=ws, check=True, env=env, stdout=subprocess.DEVNULL)
        import json
        with open(os.path.join(ws, "ids.json")) as f:
            got = json.load(f)
        kw = dict(batch_size=300, shuffle=True, seed=11, filter="id % 3 = 0", columns=["id"])
        ds = millrace.Dataset(os.path.join(ws, "ds"))
        want = [b["id"].tolist() for b in ds.loader(**kw)]
        self.assertEqual(got["a"], want, "stage_loader: the declared options")
        self.assertEqual(got["c"], want, "torch Loader.from_stage: the same batches")
        self.assertEqual(got["b"], [b["id"].tolist() for b in ds.loader(epoch=1, **kw)],
                         "a keyword given in the script replaces the declared one")
        self.assertNotEqual(got["a"], got["b"])
        self.assertEqual(got["opts"]["dataset"], "ds")
        os.environ.pop("MILLRACE_LOADERS_FILE", None)
        with self.assertRaises(millrace.Error) as e:
            millrace.stage_loader("train")
        self.assertIn("MILLRACE_LOADERS_FILE", str(e.exception))
        with self.assertRaises(ValueError) as e:
            millrace.Dataset(self.ds).loader(batch_sise=3)
        self.assertIn("did you mean 'batch_size'", str(e.exception))

    def test_no_reference_leaks(self):
        ds = millrace.Dataset(self.ds)
        def once():
            for b in ds.loader(batch_size=500, columns=["id", "name"]):
                b["id"].sum()
        once()
        gc.collect()
        before = len(gc.get_objects())
        refs = sys.getrefcount(None)
        for _ in range(20):
            once()
        gc.collect()
        self.assertLess(len(gc.get_objects()) - before, 50)
        self.assertLess(abs(sys.getrefcount(None) - refs), 50)

    def test_bundle_predict(self):
        """Bundle(path).predict equals `millrace predict` on the same rows, from a file, from
        columns (nulls as None) and from row dicts."""
        import csv
        import random
        d = tempfile.mkdtemp(dir=self.tmp.name)
        r = random.Random(3)
        with open(os.path.join(d, "train.csv"), "w") as f:
            f.write("x1,x2,plan,label\n")
            for i in range(1500):
                x1, x2, p = r.gauss(0, 1), r.gauss(0, 1), r.choice(["a", "b", "c"])
                y = int(x1 + (p == "b") + 0.3 * r.gauss(0, 1) > 0.5)
                f.write("%s,%.5f,%s,%d\n" % ("" if i % 17 == 0 else "%.5f" % x1, x2, p, y))
        # a features transform (impute x1, one-hot plan) fitted by the test tool, then a gbdt on its output
        tool = os.path.join(os.path.dirname(BIN), "tests", "mr_feattool")
        with open(os.path.join(d, "feat.yaml"), "w") as f:
            f.write("- impute: {columns: [x1], strategy: median, indicator: true}\n- onehot: {columns: [plan]}\n")
        train = os.path.join(d, "train.csv")
        subprocess.run([tool, "fit", os.path.join(d, "feat.yaml"), train, train, "label", os.path.join(d, "f.mrft")],
                       check=True, stdout=subprocess.DEVNULL)
        tx = subprocess.run([tool, "apply", os.path.join(d, "f.mrft"), train], check=True, capture_output=True,
                            text=True).stdout.splitlines()
        with open(train) as f:
            labels = [line.rsplit(",", 1)[1] for line in f.read().splitlines()]
        with open(os.path.join(d, "train_x.csv"), "w") as f:
            f.write("\n".join(a + "," + b for a, b in zip(tx, labels)) + "\n")
        subprocess.run([BIN, "train", os.path.join(d, "train_x.csv"), "--label", "label", "-p", "objective=binary",
                        "-p", "num_iterations=20", "-p", "num_leaves=7", "-o", os.path.join(d, "m.bin")],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "millrace.yaml"), "w") as f:
            f.write("stages:\n  pkg:\n    op: package\n    model: m.bin\n    features: f.mrft\n    name: t\n")
        subprocess.run([BIN, "-C", d, "run"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        bundle_path = os.path.join(d, "out", "pkg", "model.mrb")
        if not os.path.exists(bundle_path):
            import glob
            bundle_path = glob.glob(os.path.join(d, "**", "*.mrb"), recursive=True)[0]
        test = os.path.join(d, "train.csv")
        subprocess.run([BIN, "predict", bundle_path, test, "-o", os.path.join(d, "p.csv")], check=True,
                       stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "p.csv")) as f:
            want = np.array([float(row["prediction"]) for row in csv.DictReader(f)])
        b = millrace.Bundle(bundle_path)
        self.assertEqual(b.outputs, ["prediction"])
        self.assertEqual([i[0] for i in b.inputs], ["x1", "x2", "plan"])
        np.testing.assert_array_equal(b.predict(test), want)
        with open(test) as f:
            rows = list(csv.DictReader(f))
        cols = {"x1": [float(x["x1"]) if x["x1"] else None for x in rows], "x2": np.array([float(x["x2"]) for x in rows]),
                "plan": [x["plan"] for x in rows]}
        np.testing.assert_array_equal(b.predict(cols), want)
        np.testing.assert_array_equal(b.predict([{k: cols[k][i] for k in cols} for i in range(5)]), want[:5])
        raw = b.predict(test, raw=True)
        np.testing.assert_allclose(1 / (1 + np.exp(-raw)), want, rtol=1e-12)
        with self.assertRaises(millrace.Error) as e:
            b.predict({"x2": [1.0], "plan": ["a"]})
        self.assertIn("x1", str(e.exception))

    def test_log_metric(self):
        """Inside an exec stage log_metric and log_params record into the run; outside, an error."""
        import json
        d = tempfile.mkdtemp(dir=self.tmp.name)
        with open(os.path.join(d, "train.py"), "w") as f:
            f.write("import millrace\nmillrace.log_params({'lr': 0.25, 'opt': 'sgd'})\n"
                    "for i in range(3000):\n    millrace.log_metric('loss', 1.0 / (i + 1))\n"
                    "millrace.log_metric('acc', 0.75, step=7)\n")
        with open(os.path.join(d, "millrace.yaml"), "w") as f:
            f.write("stages:\n  train:\n    op: exec\n    cmd: %s train.py\n    deps: [train.py]\n" % sys.executable)
        env = dict(os.environ)
        subprocess.run([BIN, "-C", d, "run"], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run([BIN, "-C", d, "show", "1", "--json"], check=True, capture_output=True, text=True).stdout
        ms = json.loads(out)["metrics"]
        loss = sorted((m["step"], m["value"]) for m in ms if m["name"] == "loss")
        self.assertEqual(len(loss), 3000, "every logged value, batched writes included")
        self.assertEqual(loss[0], (0, 1.0))
        self.assertAlmostEqual(loss[-1][1], 1 / 3000)
        self.assertIn((7, 0.75), [(m["step"], m["value"]) for m in ms if m["name"] == "acc"])
        self.assertIn(0.25, [m["value"] for m in ms if m["name"] == "params.lr"])
        saved = os.environ.pop("MILLRACE_LOG_FILE", None)
        try:
            with self.assertRaises(millrace.Error) as e:
                millrace.log_metric("x", 1)
            self.assertIn("exec stage", str(e.exception))
        finally:
            if saved is not None:
                os.environ["MILLRACE_LOG_FILE"] = saved

    def test_raw_tensors_and_next_into(self):
        """shapes= views a binary column of fixed-size raw tensors as one N x shape array (no copy);
        a value of another length is an error; next_into copies a batch into the caller's arrays."""
        import torch
        d = tempfile.mkdtemp(dir=self.tmp.name)
        os.makedirs(os.path.join(d, "t"))
        for i in range(10):
            (np.arange(24, dtype=np.float32).reshape(2, 3, 4) + 100 * i).tofile(os.path.join(d, "t", "%02d.bin" % i))
        ds = os.path.join(d, "ds")
        subprocess.run([BIN, "data", "ingest", "--files", os.path.join(d, "t"), ds, "--column", "x"], check=True,
                       stdout=subprocess.DEVNULL)
        ld = millrace.Dataset(ds).loader(batch_size=4, shapes={"x": ((2, 3, 4), np.float32)})
        b = next(ld)
        x = b["x"]
        self.assertEqual((x.shape, x.dtype), ((4, 2, 3, 4), np.float32))
        np.testing.assert_array_equal(x[3], np.arange(24, dtype=np.float32).reshape(2, 3, 4) + 300)
        col = x.base.obj if isinstance(x.base, memoryview) else x.base
        self.assertEqual(x.__array_interface__["data"][0], col.address)
        out = {"x": torch.zeros(4, 2, 3, 4)}
        self.assertEqual(ld.next_into(out), 4)
        self.assertEqual(out["x"][0, 0, 0, 1].item(), 401.0)
        with self.assertRaises(millrace.Error) as e:
            next(millrace.Dataset(ds).loader(batch_size=4, shapes={"x": ((5,), np.float32)}))
        self.assertIn("not 20 bytes", str(e.exception))

    def test_torch_adapter(self):
        import torch
        from millrace.torch import Loader
        ld = Loader(self.ds, batch_size=1000, columns=["id", "x"], shuffle=True, seed=3)
        ld.set_epoch(1)
        batches = list(ld)
        self.assertEqual(len(batches), 5)
        self.assertIsInstance(batches[0]["id"], torch.Tensor)
        self.assertEqual(sorted(torch.cat([b["id"] for b in batches]).tolist()), list(range(self.n)))
        direct = [b["id"].tolist() for b in millrace.Dataset(self.ds).loader(
            batch_size=1000, columns=["id", "x"], shuffle=True, seed=3, epoch=1)]
        self.assertEqual([b["id"].tolist() for b in batches], direct)
        dl = torch.utils.data.DataLoader(ld, batch_size=None)
        self.assertEqual(sum(len(b["id"]) for b in dl), self.n)


if __name__ == "__main__":
    unittest.main(verbosity=2)
