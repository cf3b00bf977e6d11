"""Images in the loader (src/data/image.c, docs/python.md "Images"), against Debian's Pillow and
numpy: PNG decoding equals Pillow's exactly, JPEG at full scale within 1 of Pillow's; a random
resized crop, a center crop and flips equal a numpy reference built from the same (seed, epoch,
index) choices (loader.image_params); float32 output is the normalized uint8 one; the DCT-scaled
decode of a large JPEG stays close to the full-size reference; threads and reruns change nothing;
a broken image is an error naming its shard and path, or zeros counted with on_error="skip".
Run: MILLRACE_BIN=build/millrace PYTHONPATH=build/python python3 this."""
import os
import subprocess
import tempfile
import unittest

import numpy as np
from PIL import Image

import millrace

BIN = os.environ["MILLRACE_BIN"]


def bilinear(img, box, oh, ow, flip):
    """The loader's resampler in numpy: half-pixel centres, clamped, zeros outside the image."""
    x, y, bw, bh = box
    H, W, _ = img.shape
    exact = bw == ow and bh == oh and x == int(x) and y == int(y)
    ys = y + np.arange(oh) if exact else y + (np.arange(oh) + 0.5) * bh / oh - 0.5
    xs = x + np.arange(ow) if exact else x + (np.arange(ow) + 0.5) * bw / ow - 0.5
    out_y = (ys < -0.5) | (ys > H - 0.5)
    out_x = (xs < -0.5) | (xs > W - 0.5)
    ys = np.clip(ys, 0, H - 1)
    xs = np.clip(xs, 0, W - 1)
    y0 = ys.astype(int)
    x0 = xs.astype(int)
    y1 = np.minimum(y0 + 1, H - 1)
    x1 = np.minimum(x0 + 1, W - 1)
    wy = (ys - y0).astype(np.float32)[:, None, None]
    wx = (xs - x0).astype(np.float32)[None, :, None]
    f = img.astype(np.float32)
    top = f[y0][:, x0] + (f[y0][:, x1] - f[y0][:, x0]) * wx
    bot = f[y1][:, x0] + (f[y1][:, x1] - f[y1][:, x0]) * wx
    v = np.clip(np.floor(top + (bot - top) * wy + np.float32(0.5)), 0, 255).astype(np.uint8)
    v[out_y] = 0
    v[:, out_x] = 0
    return v[:, ::-1] if flip else v


class ImagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        rng = np.random.default_rng(7)
        cls.src = os.path.join(d, "src")
        for sub in ("png", "jpg", "big"):
            os.makedirs(os.path.join(cls.src, sub))
        cls.files = []
        for i in range(12):
            h, w = 40 + 9 * i, 60 + 4 * i
            yy, xx = np.mgrid[0:h, 0:w]
            a = np.stack([(xx * 255 // w), (yy * 255 // h), (rng.random((h, w)) * 255)], axis=2).astype(np.uint8)
            Image.fromarray(a).save(os.path.join(cls.src, "png", "%02d.png" % i))
            Image.fromarray(a).save(os.path.join(cls.src, "jpg", "%02d.jpg" % i), quality=90)
        yy, xx = np.mgrid[0:384, 0:512]
        big = np.stack([xx % 256, yy % 256, (xx + yy) % 256], axis=2).astype(np.uint8)
        Image.fromarray(big).resize((512, 384)).save(os.path.join(cls.src, "big", "big.jpg"), quality=90)
        cls.ds = os.path.join(d, "ds")
        subprocess.run([BIN, "data", "ingest", "--files", cls.src, cls.ds, "--label-from", "parent-dir",
                        "--rows-per-shard", "10"], check=True, stdout=subprocess.DEVNULL)
        cls.paths = [b for batch in millrace.Dataset(cls.ds).loader(batch_size=100, columns=["path"])
                     for b in batch["path"]]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def pil(self, rel):
        return np.asarray(Image.open(os.path.join(self.src, rel)).convert("RGB"))

    def one(self, rel, decode="image", **kw):
        ld = millrace.Dataset(self.ds).loader(batch_size=100, filter="path = '%s'" % rel, decode=decode, **kw)
        b = next(ld)
        return b["image"][0], ld

    def test_decode_equals_pillow(self):
        worst = 0
        for rel in self.paths:
            ref = self.pil(rel)
            got, _ = self.one(rel, resize=ref.shape[:2])
            if rel.endswith(".png"):
                np.testing.assert_array_equal(got, ref, err_msg=rel)
            else:
                worst = max(worst, int(np.abs(got.astype(int) - ref.astype(int)).max()))
        self.assertLessEqual(worst, 1, "JPEG at full scale within 1 of Pillow (libjpeg-turbo on both)")

    def test_random_resized_crop_and_flip(self):
        ld = millrace.Dataset(self.ds).loader(batch_size=100, decode="image", seed=5, epoch=2, hflip=0.5,
                                              random_resized_crop={"size": [24, 32], "scale": [0.2, 1.0]},
                                              filter="label = 'png'")
        b = next(ld)
        self.assertEqual(b["image"].shape, (12, 24, 32, 3))
        flips = 0
        for i, rel in enumerate(b["path"]):
            ref = self.pil(rel)
            x, y, w, h, flip = ld.image_params(i, ref.shape[1], ref.shape[0])
            flips += flip
            want = bilinear(ref, (x, y, w, h), 24, 32, flip)
            diff = np.abs(b["image"][i].astype(int) - want.astype(int))
            self.assertLessEqual(int(diff.max()), 1, rel)
            self.assertGreater(float((diff == 0).mean()), 0.99, rel)
        self.assertTrue(0 < flips < 12, "some samples flipped, some not")
        other = next(millrace.Dataset(self.ds).loader(batch_size=100, decode="image", seed=5, epoch=3, hflip=0.5,
                                                      random_resized_crop={"size": [24, 32], "scale": [0.2, 1.0]},
                                                      filter="label = 'png'"))
        self.assertFalse(np.array_equal(other["image"], b["image"]), "another epoch, other crops")

    def test_center_crop(self):
        rel = [p for p in self.paths if p.endswith(".png")][5]
        ref = self.pil(rel)
        got, ld = self.one(rel, resize=36, center_crop=32)
        x, y, w, h, _ = ld.image_params(0, ref.shape[1], ref.shape[0])
        want = bilinear(ref, (x, y, w, h), 32, 32, False)
        self.assertLessEqual(int(np.abs(got.astype(int) - want.astype(int)).max()), 1)
        small = [p for p in self.paths if p.endswith(".png")][0]  # 40 x 60: a 50 x 50 crop pads rows with zeros
        got, _ = self.one(small, center_crop=50)
        ref = self.pil(small)
        np.testing.assert_array_equal(got[5:45], ref[:, 5:55])
        self.assertEqual(int(got[:5].max()), 0)

    def test_float_output(self):
        mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
        kw = dict(random_resized_crop=[16, 16], hflip=0.5, seed=3)
        u8 = next(millrace.Dataset(self.ds).loader(batch_size=24, decode="image", **kw))["image"]
        f32 = next(millrace.Dataset(self.ds).loader(batch_size=24, decode="image", output="float32",
                                                    normalize={"mean": mean, "std": std}, **kw))["image"]
        self.assertEqual(f32.shape, (24, 3, 16, 16))
        self.assertEqual(f32.dtype, np.float32)
        want = ((u8.astype(np.float32) / np.float32(255) - np.array(mean, np.float32)) / np.array(std, np.float32))
        np.testing.assert_array_equal(f32, want.transpose(0, 3, 1, 2))  # float32 arithmetic, step for step
        # whole-pixel boxes (00.png and 00.jpg are 40 x 60: resized to their own size), normalized
        same = next(millrace.Dataset(self.ds).loader(batch_size=24, decode="image", resize=[40, 60], output="float32",
                                                     normalize={"mean": mean, "std": std}))["image"]
        raw = next(millrace.Dataset(self.ds).loader(batch_size=24, decode="image", resize=[40, 60]))["image"]
        want = ((raw.astype(np.float32) / np.float32(255) - np.array(mean, np.float32)) / np.array(std, np.float32))
        np.testing.assert_array_equal(same, want.transpose(0, 3, 1, 2))
        i = self.paths.index("png/00.png")
        pil = np.asarray(Image.open(os.path.join(self.src, "png", "00.png")).convert("RGB"))
        np.testing.assert_array_equal(raw[i], pil, "a whole-pixel resize gives the decoded pixels")

    def test_dct_scaled_jpeg(self):
        ref = self.pil("big/big.jpg")
        kw = dict(random_resized_crop={"size": [64, 64], "scale": [0.5, 1.0]}, seed=9)
        full, ld = self.one("big/big.jpg", decode={"column": "image", "dct_scale": False}, **kw)
        x, y, w, h, flip = ld.image_params(0, 512, 384)
        self.assertGreaterEqual(w * h, 0.5 * 512 * 384 * 0.99)
        want = bilinear(ref, (x, y, w, h), 64, 64, flip)
        self.assertLessEqual(int(np.abs(full.astype(int) - want.astype(int)).max()), 2)
        scaled, _ = self.one("big/big.jpg", **kw)  # decoded at 1/4 or 1/2 scale: close, not equal
        mad = float(np.abs(scaled.astype(int) - want.astype(int)).mean())
        self.assertLess(mad, 12, "the DCT-scaled decode stays close to the full-size one (mean |diff| %.2f)" % mad)

    def test_threads_and_reruns(self):
        kw = dict(batch_size=7, decode="image", random_resized_crop=[20, 20], hflip=0.5, shuffle=True, seed=11)
        a = [b["image"].copy() for b in millrace.Dataset(self.ds).loader(threads=1, **kw)]
        b = [b["image"].copy() for b in millrace.Dataset(self.ds).loader(threads=2, **kw)]
        self.assertEqual(len(a), 4)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)

    def test_zero_copy(self):
        import torch
        ld = millrace.Dataset(self.ds).loader(batch_size=8, decode="image", resize=(10, 10))
        b = next(ld)
        a = b["image"]
        col = a.base.obj if isinstance(a.base, memoryview) else a.base
        self.assertEqual(a.__array_interface__["data"][0], col.address)
        raw = ld.columns()["image"]  # the next batch's decoded column, through DLPack
        t = torch.from_dlpack(raw)
        self.assertEqual(tuple(t.shape), (8, 10, 10, 3))
        self.assertEqual(t.dtype, torch.uint8)
        self.assertEqual(t.data_ptr(), raw.address)
        np.testing.assert_array_equal(t.numpy(), np.asarray(raw))

    def test_broken_image(self):
        d = os.path.join(self.tmp.name, "broken")
        os.makedirs(os.path.join(d, "x"))
        for i in range(3):
            Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(os.path.join(d, "x", "%d.png" % i))
        with open(os.path.join(d, "x", "1.png"), "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\nnot really")
        ds = os.path.join(self.tmp.name, "brokends")
        subprocess.run([BIN, "data", "ingest", "--files", d, ds], check=True, stdout=subprocess.DEVNULL)
        with self.assertRaises(millrace.Error) as e:
            list(millrace.Dataset(ds).loader(batch_size=3, decode="image", resize=(8, 8)))
        self.assertIn("part-00000.parquet", str(e.exception))
        self.assertIn("path x/1.png", str(e.exception))
        self.assertIn("not a readable PNG", str(e.exception))
        ld = millrace.Dataset(ds).loader(batch_size=3, decode="image", resize=(8, 8), on_error="skip")
        img = next(ld)["image"]
        self.assertEqual(int(img[1].max()), 0)
        self.assertEqual(int(img[2].min()), 80)
        self.assertEqual(ld.stats()["decode_errors"], 1)
        with self.assertRaises(ValueError):
            millrace.Dataset(ds).loader(decode="image")  # no output size


if __name__ == "__main__":
    unittest.main(verbosity=2)
