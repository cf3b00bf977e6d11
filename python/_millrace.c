/* millrace's CPython extension (the public C API of Python 3.11, Debian's
 * python3-dev): the dataset loader as an iterator of batches, whose
 * fixed-width columns Python reads without a copy.
 *
 *   _millrace.dataset_info(path) -> dict: rows, shards, schema [(name, type, kind)]
 *   _millrace.Loader(path, batch_size, columns, filter, shuffle, seed, epoch,
 *                    start_batch, threads, prefetch, drop_last, shuffle_buffer, rank, world_size)
 *       iterator: each item a dict name -> Column (fixed-width: the buffer
 *       protocol over the batch's memory) or a list (strings: str, binary:
 *       bytes, nulls: None), plus name -> bytes validity bitmap under
 *       "__valid__" for columns with nulls (the Python layer makes masks)
 *       .stats() -> dict; .batches -> batches returned
 *
 * Memory: a Batch object owns one mr_table; every Column of it holds the
 * Batch, and every exported buffer holds its Column, so a batch's memory is
 * freed when the last array over it is released, not before. The GIL is
 * released while the loader opens and while it waits for a batch. Errors
 * are millrace.Error (a RuntimeError) with millrace's message: file, row,
 * column. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "millrace/core.h"
#include "millrace/bundle.h"
#include "millrace/registry.h"
#include "millrace/dataset.h"
#include "millrace/image.h"
#include "millrace/io.h"
#include "millrace/loader.h"

#include <string.h>

static PyObject *MrError;

/* exc with millrace's message, and its hint ("did you mean ...") on a line of its own. */
static PyObject *raise_as(PyObject *exc, const mr_error *err)
{
    char msg[MR_ERR_MSG_MAX + 3 * MR_ERR_CTX_MAX];
    mr_error_format(err, msg, sizeof msg);
    if (err->hint[0]) PyErr_Format(exc, "%s\nhint: %s", msg, err->hint);
    else PyErr_SetString(exc, msg);
    return NULL;
}

static PyObject *raise_mr(const mr_error *err) { return raise_as(MrError, err); }

/* ---- Batch: owns one table ------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    mr_table *t;
} BatchObject;

static void batch_dealloc(BatchObject *self)
{
    mr_table_free(self->t);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "millrace._millrace.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "the memory of one batch (internal)",
};

/* ---- Column: a fixed-width column of a batch, as a buffer ------------------------------- */

typedef struct {
    PyObject_HEAD
    BatchObject *batch;
    const mr_column *c;
    void *buf;            /* the values: c->data, or a decoded image column's bytes */
    Py_ssize_t len, itemsize;
    int ndim;
    Py_ssize_t shape[4], strides[4];
    const char *format;
    char fmt[2];          /* a raw tensor column's own format string */
} ColumnObject;

static const char *format_of(const mr_column *c)
{
    switch (c->type) {
    case MR_T_BOOL: return "?";
    case MR_T_INT64:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: return "q";
    case MR_T_FLOAT64: return "d";
    case MR_T_FLOAT32: return "f";
    case MR_T_DATE: return "i";
    default: return NULL;
    }
}

static int column_getbuffer(ColumnObject *self, Py_buffer *view, int flags)
{
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "millrace batch columns are read-only");
        view->obj = NULL;
        return -1;
    }
    static char empty[8];
    view->buf = self->buf && self->len ? self->buf : empty;
    view->obj = (PyObject *)self;
    Py_INCREF(self);
    view->len = self->len;
    view->readonly = 1;
    view->itemsize = self->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? (char *)self->format : NULL;
    view->ndim = self->ndim;
    view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? self->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static PyBufferProcs column_as_buffer = {(getbufferproc)column_getbuffer, NULL};

static void column_dealloc(ColumnObject *self)
{
    Py_XDECREF(self->batch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *column_address(ColumnObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr(self->buf);
}

static PyObject *column_len_get(ColumnObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(self->c->n);
}

static PyObject *column_type_get(ColumnObject *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(mr_dtype_name(self->c->type));
}

/* ---- DLPack (the data-interchange ABI of dlpack.h, v0.x, declared here from its spec):
 * __dlpack__ hands torch.from_dlpack, numpy.from_dlpack, ... a view of the same memory. ---- */

typedef struct { int32_t device_type, device_id; } mr_DLDevice; /* kDLCPU = 1 */
typedef struct { uint8_t code, bits; uint16_t lanes; } mr_DLDataType; /* code: 0 int, 1 uint, 2 float */
typedef struct {
    void *data;
    mr_DLDevice device;
    int32_t ndim;
    mr_DLDataType dtype;
    int64_t *shape, *strides; /* strides in elements */
    uint64_t byte_offset;
} mr_DLTensor;
typedef struct mr_DLManagedTensor {
    mr_DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct mr_DLManagedTensor *self);
} mr_DLManagedTensor;

typedef struct dl_ctx {
    mr_DLManagedTensor t;
    int64_t shape[4], strides[4];
    PyObject *owner; /* the Column, kept alive while the consumer holds the tensor */
} dl_ctx;

static void dl_deleter(mr_DLManagedTensor *t)
{
    dl_ctx *c = (dl_ctx *)t;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(c->owner);
    PyGILState_Release(g);
    PyMem_RawFree(c);
}

static void dl_capsule_destructor(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, "dltensor")) return; /* consumed: "used_dltensor", the consumer's now */
    mr_DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
    if (t && t->deleter) t->deleter(t);
}

static PyObject *column_dlpack(ColumnObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", NULL};
    PyObject *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwlist, &stream)) return NULL;
    if (stream != Py_None) {
        PyErr_SetString(PyExc_BufferError, "millrace batches live in CPU memory: stream must be None");
        return NULL;
    }
    dl_ctx *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c) return PyErr_NoMemory();
    static char empty[8];
    char f = self->format[0];
    c->t.dl_tensor.data = self->buf && self->len ? self->buf : empty;
    c->t.dl_tensor.device = (mr_DLDevice){1, 0};
    c->t.dl_tensor.ndim = self->ndim;
    c->t.dl_tensor.dtype = (mr_DLDataType){(uint8_t)(f == 'd' || f == 'f' ? 2 : f == '?' || f == 'B' ? 1 : 0),
                                            (uint8_t)(self->itemsize * 8), 1};
    for (int d = 0; d < self->ndim; d++) {
        c->shape[d] = self->shape[d];
        c->strides[d] = self->strides[d] / self->itemsize;
    }
    c->t.dl_tensor.shape = c->shape;
    c->t.dl_tensor.strides = c->strides;
    c->t.manager_ctx = c;
    c->t.deleter = dl_deleter;
    Py_INCREF(self);
    c->owner = (PyObject *)self;
    PyObject *cap = PyCapsule_New(&c->t, "dltensor", dl_capsule_destructor);
    if (!cap) dl_deleter(&c->t);
    return cap;
}

static PyObject *column_dlpack_device(ColumnObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return Py_BuildValue("(ii)", 1, 0); /* kDLCPU, device 0 */
}

static PyMethodDef column_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))column_dlpack, METH_VARARGS | METH_KEYWORDS,
     "a DLPack capsule over the same memory (torch.from_dlpack)"},
    {"__dlpack_device__", (PyCFunction)column_dlpack_device, METH_NOARGS, "(kDLCPU, 0)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef column_getset[] = {
    {"address", (getter)column_address, NULL, "address of the values (the batch's own memory)", NULL},
    {"length", (getter)column_len_get, NULL, "values", NULL},
    {"type", (getter)column_type_get, NULL, "millrace type name", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "millrace._millrace.Column",
    .tp_basicsize = sizeof(ColumnObject),
    .tp_dealloc = (destructor)column_dealloc,
    .tp_as_buffer = &column_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a fixed-width column of a batch: numpy.asarray() and torch.from_dlpack() read it without a copy",
    .tp_getset = column_getset,
    .tp_methods = column_methods,
};

/* The values of a string column as a list (str, or bytes for binary; None for null). */
static PyObject *string_list(const mr_column *c)
{
    PyObject *list = PyList_New((Py_ssize_t)c->n);
    if (!list) return NULL;
    int binary = (c->kind.flags & MR_KIND_BINARY) != 0;
    for (size_t i = 0; i < c->n; i++) {
        PyObject *v;
        if (mr_column_is_null(c, i)) {
            v = Py_None;
            Py_INCREF(v);
        } else {
            size_t len;
            const char *s = mr_column_str(c, i, &len);
            v = binary ? PyBytes_FromStringAndSize(s, (Py_ssize_t)len)
                       : PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "surrogateescape");
        }
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

static ColumnObject *new_column(BatchObject *b, const mr_column *c);

/* What the loader decodes, for the shape of the decoded column; and the binary columns that
 * hold fixed-size raw tensors ({name: (shape tuple, struct format char)}). */
typedef struct img_shape {
    const char *column; /* NULL: none */
    int h, w, to_float;
    PyObject *tensors;  /* dict or NULL (borrowed from the loader) */
} img_shape;

/* A binary column of equal-length values as an N x shape array over its bytes; NULL with an
 * exception when a value has another length. */
static PyObject *tensor_column(BatchObject *b, const mr_column *c, PyObject *spec)
{
    PyObject *shape = NULL;
    const char *fmt = NULL;
    if (!PyArg_ParseTuple(spec, "Os", &shape, &fmt)) return NULL;
    PyObject *seq = PySequence_Fast(shape, "shape must be a sequence of sizes");
    if (!seq) return NULL;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq), is = 0, per = 1;
    switch (fmt[0]) {
    case 'B': case 'b': case '?': is = 1; break;
    case 'h': case 'H': case 'e': is = 2; break;
    case 'i': case 'I': case 'f': is = 4; break;
    case 'q': case 'Q': case 'd': is = 8; break;
    default: break;
    }
    if (nd < 1 || nd > 3 || !is || fmt[1]) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "column '%s': shape of 1 to 3 sizes and a numpy dtype, got %s", c->name, fmt);
        return NULL;
    }
    ColumnObject *co = new_column(b, c);
    if (!co) {
        Py_DECREF(seq);
        return NULL;
    }
    co->shape[0] = (Py_ssize_t)c->n;
    for (Py_ssize_t d = 0; d < nd; d++) {
        co->shape[d + 1] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, d));
        if (co->shape[d + 1] <= 0) {
            Py_DECREF(seq);
            Py_DECREF(co);
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "column '%s': sizes must be positive", c->name);
            return NULL;
        }
        per *= co->shape[d + 1];
    }
    Py_DECREF(seq);
    Py_ssize_t want = per * is;
    for (size_t i = 0; i < c->n; i++) {
        size_t len = 0;
        int null = mr_column_is_null(c, i);
        if (!null) mr_column_str(c, i, &len);
        if (null || (Py_ssize_t)len != want || (c->offsets && c->offsets[i] - c->offsets[0] != (int64_t)i * want)) {
            Py_DECREF(co);
            PyErr_Format(MrError, "column '%s', row %zu of the batch: %s, not %zd bytes (a %s tensor)", c->name, i,
                         null ? "null" : "another length", want, fmt);
            return NULL;
        }
    }
    co->buf = c->n && c->offsets ? c->bytes + c->offsets[0] : c->bytes;
    co->itemsize = is;
    co->len = (Py_ssize_t)c->n * want;
    co->ndim = (int)nd + 1;
    co->fmt[0] = fmt[0]; /* the spec tuple may go before the column does */
    co->fmt[1] = '\0';
    co->format = co->fmt;
    co->strides[nd] = is;
    for (Py_ssize_t d = nd - 1; d >= 0; d--) co->strides[d] = co->strides[d + 1] * co->shape[d + 1];
    return (PyObject *)co;
}

static ColumnObject *new_column(BatchObject *b, const mr_column *c)
{
    ColumnObject *co = PyObject_New(ColumnObject, &ColumnType);
    if (!co) return NULL;
    Py_INCREF(b);
    co->batch = b;
    co->c = c;
    co->ndim = 1;
    return co;
}

/* A batch as a dict (takes t). */
static PyObject *batch_dict(mr_table *t, const img_shape *im)
{
    BatchObject *b = PyObject_New(BatchObject, &BatchType);
    if (!b) {
        mr_table_free(t);
        return NULL;
    }
    b->t = t;
    PyObject *d = PyDict_New(), *valid = PyDict_New();
    if (!d || !valid) goto fail;
    for (size_t j = 0; j < t->n_cols; j++) {
        const mr_column *c = t->cols[j];
        PyObject *v;
        if (im->column && !strcmp(c->name, im->column)) { /* decoded samples back to back: a 4-d tensor */
            ColumnObject *co = new_column(b, c);
            if (!co) goto fail;
            Py_ssize_t n = (Py_ssize_t)c->n, h = im->h, w = im->w, is = im->to_float ? 4 : 1;
            co->buf = c->bytes;
            co->itemsize = is;
            co->len = n * h * w * 3 * is;
            co->ndim = 4;
            co->format = im->to_float ? "f" : "B";
            Py_ssize_t dims[4] = {n, h, w, 3}, chw[4] = {n, 3, h, w};
            memcpy(co->shape, im->to_float ? chw : dims, sizeof co->shape);
            co->strides[3] = is;
            for (int d = 2; d >= 0; d--) co->strides[d] = co->strides[d + 1] * co->shape[d + 1];
            v = (PyObject *)co;
        } else if (im->tensors && c->type == MR_T_STRING && PyDict_GetItemString(im->tensors, c->name)) {
            v = tensor_column(b, c, PyDict_GetItemString(im->tensors, c->name));
            if (!v) goto fail;
        } else if (format_of(c)) {
            ColumnObject *co = new_column(b, c);
            if (!co) goto fail;
            co->buf = c->data;
            co->itemsize = (Py_ssize_t)mr_dtype_width(c->type);
            co->len = (Py_ssize_t)c->n * co->itemsize;
            co->shape[0] = (Py_ssize_t)c->n;
            co->strides[0] = co->itemsize;
            co->format = format_of(c);
            v = (PyObject *)co;
        } else {
            v = string_list(c);
        }
        if (!v || PyDict_SetItemString(d, c->name, v) < 0) {
            Py_XDECREF(v);
            goto fail;
        }
        Py_DECREF(v);
        if (c->null_count && c->valid && format_of(c)) {
            PyObject *bits = PyBytes_FromStringAndSize((const char *)c->valid, (Py_ssize_t)((c->n + 7) / 8));
            if (!bits || PyDict_SetItemString(valid, c->name, bits) < 0) {
                Py_XDECREF(bits);
                goto fail;
            }
            Py_DECREF(bits);
        }
    }
    if (PyDict_Size(valid) && PyDict_SetItemString(d, "__valid__", valid) < 0) goto fail;
    Py_DECREF(valid);
    Py_DECREF(b);
    return d;
fail:
    Py_XDECREF(d);
    Py_XDECREF(valid);
    Py_DECREF(b);
    return NULL;
}

/* ---- Loader ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    mr_loader *ld;
    uint64_t batches;
    int done;
    img_shape im;
    char *im_column;
    PyObject *tensors; /* {name: (shape, dtype char)} or NULL */
    mr_image_opts image; /* for image_params */
    uint64_t seed, epoch;
} LoaderObject;

/* Loader(path, options_json, tensors): the options are the JSON of the Python keywords
 * (millrace/__init__.py), read by the parser that reads a `loaders:` entry of millrace.yaml
 * (mr_loader_spec_parse), so both accept the same keys with the same meaning. A bad option is a
 * ValueError carrying millrace's message. */
static int loader_init(LoaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "options", "tensors", NULL};
    const char *path = NULL, *json = NULL;
    Py_ssize_t json_len = 0;
    PyObject *tensors = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss#|O", kwlist, &path, &json, &json_len, &tensors)) return -1;
    if (tensors != Py_None && !PyDict_Check(tensors)) {
        PyErr_SetString(PyExc_TypeError, "tensors must be a dict {column: (shape, dtype)}");
        return -1;
    }
    mr_error err;
    mr_error_init(&err);
    mr_value *v = NULL;
    mr_loader_spec spec;
    memset(&spec, 0, sizeof spec);
    mr_status rc = mr_value_from_json(json, (size_t)json_len, "the loader options", &v, &err);
    if (rc == MR_OK) rc = mr_loader_spec_parse(v, &spec, &err);
    if (rc != MR_OK) {
        mr_value_free(v);
        if (rc == MR_E_NOMEM) {
            PyErr_NoMemory();
            return -1;
        }
        raise_as(PyExc_ValueError, &err);
        return -1;
    }
    PyMem_Free(self->im_column);
    self->im_column = NULL;
    self->im = (img_shape){NULL, 0, 0, 0, NULL};
    const mr_loader_opts *o = &spec.opts;
    if (o->decode_column) {
        self->im_column = PyMem_Malloc(strlen(o->decode_column) + 1);
        if (!self->im_column) {
            mr_loader_spec_free(&spec);
            mr_value_free(v);
            PyErr_NoMemory();
            return -1;
        }
        strcpy(self->im_column, o->decode_column);
        self->im = (img_shape){self->im_column, o->image.out_h, o->image.out_w, o->image.to_float, NULL};
    }
    self->image = o->image;
    self->seed = o->seed;
    self->epoch = o->epoch;
    Py_CLEAR(self->tensors);
    if (tensors != Py_None) {
        Py_INCREF(tensors);
        self->tensors = tensors;
    }
    self->im.tensors = self->tensors;
    if (self->ld) {
        mr_loader_close(self->ld);
        self->ld = NULL;
    }
    mr_loader *ld = NULL;
    Py_BEGIN_ALLOW_THREADS rc = mr_loader_open(path, o, &ld, &err);
    Py_END_ALLOW_THREADS mr_loader_spec_free(&spec);
    mr_value_free(v);
    if (rc != MR_OK) {
        raise_mr(&err);
        return -1;
    }
    self->ld = ld;
    self->batches = 0;
    self->done = 0;
    return 0;
}

static void loader_dealloc(LoaderObject *self)
{
    mr_loader *ld = self->ld;
    self->ld = NULL;
    if (ld) {
        Py_BEGIN_ALLOW_THREADS mr_loader_close(ld); /* joins the threads */
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(self->im_column);
    Py_XDECREF(self->tensors);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *loader_next(LoaderObject *self)
{
    if (!self->ld) {
        PyErr_SetString(MrError, "the loader is closed");
        return NULL;
    }
    if (self->done) return NULL;
    mr_table *t = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status rc;
    Py_BEGIN_ALLOW_THREADS rc = mr_loader_next(self->ld, &t, &err);
    Py_END_ALLOW_THREADS if (rc != MR_OK) return raise_mr(&err);
    if (!t) {
        self->done = 1;
        return NULL; /* StopIteration */
    }
    self->batches++;
    return batch_dict(t, &self->im);
}

static PyObject *loader_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->ld) {
        PyErr_SetString(MrError, "the loader is closed");
        return NULL;
    }
    mr_loader_stats st;
    mr_loader_stats_get(self->ld, &st);
    return Py_BuildValue("{s:d,s:d,s:d,s:K,s:K,s:K,s:K,s:d,s:K,s:K}", "wait_seconds", st.wait_seconds,
                         "total_seconds", st.total_seconds, "input_bound_fraction", st.input_bound_fraction, "batches",
                         (unsigned long long)st.batches, "rows", (unsigned long long)st.rows, "blocks",
                         (unsigned long long)st.blocks, "blocks_decoded", (unsigned long long)st.blocks_decoded,
                         "decode_seconds", st.decode_seconds, "images", (unsigned long long)st.images,
                         "decode_errors", (unsigned long long)st.decode_errors);
}

static PyObject *loader_close(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    mr_loader *ld = self->ld;
    self->ld = NULL;
    if (ld) {
        Py_BEGIN_ALLOW_THREADS mr_loader_close(ld);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *loader_batches(LoaderObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->batches);
}

/* image_params(index, width, height) -> (x, y, w, h, flip): the random choices of the sample at
 * position index of the epoch for an image of that size, for references in tests. */
static PyObject *loader_image_params(LoaderObject *self, PyObject *args)
{
    unsigned long long index;
    int w, h;
    if (!PyArg_ParseTuple(args, "Kii", &index, &w, &h)) return NULL;
    if (!self->im.column) {
        PyErr_SetString(PyExc_ValueError, "this loader decodes no images");
        return NULL;
    }
    mr_image_box b;
    mr_image_params(&self->image, self->seed, self->epoch, index, w, h, &b);
    return Py_BuildValue("(ddddi)", b.x, b.y, b.w, b.h, b.flip);
}

static PyMethodDef loader_methods[] = {
    {"image_params", (PyCFunction)loader_image_params, METH_VARARGS, "a sample's random crop box and flip"},
    {"stats", (PyCFunction)loader_stats, METH_NOARGS, "wait and total seconds, input-bound fraction, counts"},
    {"close", (PyCFunction)loader_close, METH_NOARGS, "stop the loader's threads now"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
    {"batches", (getter)loader_batches, NULL, "batches returned so far", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "millrace._millrace.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "batches of a dataset, in millrace's deterministic (seed, epoch) order",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)loader_next,
    .tp_methods = loader_methods,
    .tp_getset = loader_getset,
    .tp_init = (initproc)loader_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Bundle: the model and its preprocessing, as millrace predict runs them -------------- */

typedef struct {
    PyObject_HEAD
    mr_bundle *b;
} BundleObject;

static int bundle_init(BundleObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", NULL};
    const char *path;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s", kwlist, &path)) return -1;
    mr_bundle_free(self->b);
    self->b = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status rc = MR_OK;
    char *resolved = NULL; /* a registry URI (models:/NAME@ALIAS): the version's bundle in the store */
    Py_BEGIN_ALLOW_THREADS if (mr_registry_is_uri(path)) rc = mr_registry_resolve_uri(path, NULL, &resolved, NULL, &err);
    if (rc == MR_OK) rc = mr_bundle_load(resolved ? resolved : path, &self->b, &err);
    Py_END_ALLOW_THREADS mr_free(resolved);
    if (rc != MR_OK) {
        raise_mr(&err);
        return -1;
    }
    return 0;
}

static void bundle_dealloc(BundleObject *self)
{
    mr_bundle_free(self->b);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Scores table t (taken): (bytes of n * k doubles, k). */
static PyObject *bundle_score(BundleObject *self, mr_table *t, int text, int raw)
{
    mr_error err;
    mr_error_init(&err);
    mr_bundle_conform_opts co;
    mr_bundle_conform_opts_init(&co);
    co.text = text;
    co.row_base = 1;
    double *out = NULL;
    size_t k = 0, n = t->n_rows;
    mr_status rc;
    Py_BEGIN_ALLOW_THREADS rc = mr_bundle_conform_table(self->b, t, &co, &err);
    if (rc == MR_OK) rc = mr_bundle_predict_table(self->b, t, raw, 0, &out, &k, &err);
    Py_END_ALLOW_THREADS mr_table_free(t);
    if (rc != MR_OK) return raise_mr(&err);
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(n * k * sizeof(double)));
    mr_free(out);
    if (!bytes) return NULL;
    return Py_BuildValue("(Nn)", bytes, (Py_ssize_t)k);
}

/* predict_file(path, raw): a CSV/Parquet/JSON lines file or a dataset, as millrace predict reads it. */
static PyObject *bundle_predict_file(BundleObject *self, PyObject *args)
{
    const char *path;
    int raw = 0;
    if (!PyArg_ParseTuple(args, "s|p", &path, &raw)) return NULL;
    mr_table *t = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status rc;
    Py_BEGIN_ALLOW_THREADS rc = mr_table_read_file(path, &t, &err);
    Py_END_ALLOW_THREADS if (rc != MR_OK) return raise_mr(&err);
    return bundle_score(self, t, 0, raw);
}

/* predict_columns({name: ("f", float64 buffer[, null mask bytes]) | ("s", [str or None])}, n, raw). */
static PyObject *bundle_predict_columns(BundleObject *self, PyObject *args)
{
    PyObject *cols;
    Py_ssize_t n;
    int raw = 0;
    if (!PyArg_ParseTuple(args, "O!n|p", &PyDict_Type, &cols, &n, &raw)) return NULL;
    mr_table *t = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_table_new(&t, &err) != MR_OK) return raise_mr(&err);
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(cols, &pos, &key, &val)) {
        const char *name = PyUnicode_AsUTF8(key);
        const char *kind = NULL;
        PyObject *data = NULL, *nulls = Py_None;
        if (!name || !PyArg_ParseTuple(val, "sO|O", &kind, &data, &nulls)) goto fail;
        mr_column *c = NULL;
        mr_status rc = MR_OK;
        if (kind[0] == 'f') {
            Py_buffer view;
            if (PyObject_GetBuffer(data, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto fail;
            if (view.itemsize != 8 || !view.format || strcmp(view.format, "d") || view.len / 8 != n) {
                PyBuffer_Release(&view);
                PyErr_Format(PyExc_ValueError, "column '%s': expected %zd float64 values", name, n);
                goto fail;
            }
            const char *isnull = NULL; /* optional bytes: 1 where the value is null (None) */
            if (nulls != Py_None && (!PyBytes_Check(nulls) || PyBytes_GET_SIZE(nulls) != n)) {
                PyBuffer_Release(&view);
                PyErr_Format(PyExc_ValueError, "column '%s': bad null mask", name);
                goto fail;
            }
            if (nulls != Py_None) isnull = PyBytes_AS_STRING(nulls);
            rc = mr_column_new(name, MR_T_FLOAT64, (size_t)n, &c, &err);
            for (Py_ssize_t i = 0; rc == MR_OK && i < n; i++)
                rc = isnull && isnull[i] ? mr_column_append_null(c) : mr_column_append_float64(c, ((double *)view.buf)[i]);
            PyBuffer_Release(&view);
        } else {
            PyObject *seq = PySequence_Fast(data, "expected a list of str or None");
            if (!seq) goto fail;
            if (PySequence_Fast_GET_SIZE(seq) != n) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_ValueError, "column '%s': expected %zd values", name, n);
                goto fail;
            }
            rc = mr_column_new(name, MR_T_STRING, (size_t)n, &c, &err);
            for (Py_ssize_t i = 0; rc == MR_OK && i < n; i++) {
                PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
                if (o == Py_None) {
                    rc = mr_column_append_null(c);
                    continue;
                }
                Py_ssize_t len;
                const char *sv = PyUnicode_AsUTF8AndSize(o, &len);
                if (!sv) {
                    Py_DECREF(seq);
                    mr_column_free(c);
                    goto fail;
                }
                rc = mr_column_append_str(c, sv, (size_t)len);
            }
            Py_DECREF(seq);
        }
        if (rc == MR_OK) rc = mr_table_add_column(t, c, &err);
        else mr_column_free(c);
        if (rc != MR_OK) {
            if (!mr_error_is_set(&err)) MR_ERR(&err, rc, "out of memory");
            mr_table_free(t);
            return raise_mr(&err);
        }
    }
    t->n_rows = (size_t)n;
    return bundle_score(self, t, 1, raw);
fail:
    mr_table_free(t);
    return NULL;
}

static PyObject *bundle_inputs(BundleObject *self, void *closure)
{
    (void)closure;
    PyObject *l = PyList_New(0);
    for (size_t i = 0; l && i < mr_bundle_n_inputs(self->b); i++) {
        const mr_bundle_input *in = mr_bundle_input_at(self->b, i);
        PyObject *t = Py_BuildValue("(ssOO)", in->name, mr_dtype_name(in->type), in->categorical ? Py_True : Py_False,
                                    in->required ? Py_True : Py_False);
        if (!t || PyList_Append(l, t) < 0) {
            Py_XDECREF(t);
            Py_CLEAR(l);
        } else {
            Py_DECREF(t);
        }
    }
    return l;
}

static PyObject *bundle_outputs(BundleObject *self, void *closure)
{
    (void)closure;
    PyObject *l = PyList_New(0);
    for (size_t k = 0; l && k < mr_bundle_n_outputs(self->b); k++) {
        PyObject *s = PyUnicode_FromString(mr_bundle_output_name(self->b, k));
        if (!s || PyList_Append(l, s) < 0) Py_CLEAR(l);
        Py_XDECREF(s);
    }
    return l;
}

static PyObject *bundle_version(BundleObject *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(mr_bundle_version_id(self->b));
}

static PyMethodDef bundle_methods[] = {
    {"predict_file", (PyCFunction)bundle_predict_file, METH_VARARGS, "scores a file or dataset: (bytes, outputs)"},
    {"predict_columns", (PyCFunction)bundle_predict_columns, METH_VARARGS, "scores columns: (bytes, outputs)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef bundle_getset[] = {
    {"inputs", (getter)bundle_inputs, NULL, "(name, type, categorical, required) per raw input", NULL},
    {"outputs", (getter)bundle_outputs, NULL, "output names", NULL},
    {"version", (getter)bundle_version, NULL, "xxh3-128 of the bundle file", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BundleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "millrace._millrace.Bundle",
    .tp_basicsize = sizeof(BundleObject),
    .tp_dealloc = (destructor)bundle_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "a model bundle: its preprocessing and model, as millrace predict runs them",
    .tp_methods = bundle_methods,
    .tp_getset = bundle_getset,
    .tp_init = (initproc)bundle_init,
    .tp_new = PyType_GenericNew,
};

/* ---- dataset_info -------------------------------------------------------------------------- */

static PyObject *dataset_info(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    mr_dataset *ds = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status rc;
    Py_BEGIN_ALLOW_THREADS rc = mr_dataset_open(path, &ds, &err);
    Py_END_ALLOW_THREADS if (rc != MR_OK) return raise_mr(&err);
    PyObject *schema = PyList_New(0), *out = NULL;
    for (size_t j = 0; schema && j < mr_dataset_n_cols(ds); j++) {
        char kn[32];
        mr_colkind k = mr_dataset_col_kind(ds, j);
        PyObject *c = Py_BuildValue("(sss)", mr_dataset_col_name(ds, j), mr_dtype_name(mr_dataset_col_type(ds, j)),
                                    mr_kind_name(mr_dataset_col_type(ds, j), k, kn, sizeof kn));
        if (!c || PyList_Append(schema, c) < 0) {
            Py_XDECREF(c);
            Py_CLEAR(schema);
            break;
        }
        Py_DECREF(c);
    }
    if (schema)
        out = Py_BuildValue("{s:K,s:n,s:O}", "rows", (unsigned long long)mr_dataset_n_rows(ds), "shards",
                            (Py_ssize_t)mr_dataset_n_shards(ds), "schema", schema);
    Py_XDECREF(schema);
    mr_dataset_close(ds);
    return out;
}

static PyMethodDef module_methods[] = {
    {"dataset_info", dataset_info, METH_VARARGS, "rows, shards and schema of a dataset directory"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_millrace", "millrace's C core (use the millrace package)", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__millrace(void)
{
    if (PyType_Ready(&BatchType) < 0 || PyType_Ready(&ColumnType) < 0 || PyType_Ready(&LoaderType) < 0 ||
        PyType_Ready(&BundleType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    MrError = PyErr_NewException("millrace.Error", PyExc_RuntimeError, NULL);
    if (!MrError || PyModule_AddObjectRef(m, "Error", MrError) < 0 ||
        PyModule_AddObjectRef(m, "Loader", (PyObject *)&LoaderType) < 0 ||
        PyModule_AddObjectRef(m, "Bundle", (PyObject *)&BundleType) < 0 ||
        PyModule_AddStringConstant(m, "version", MILLRACE_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
