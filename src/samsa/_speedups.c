/* samsa._speedups: the per-record hot path of samsa.Producer.send() in C.
 *
 * Records: the record encoder of samsa.protocol.records.BatchBuilder. One Kafka v2 record
 *   per append() call, written at the end of a bytearray that starts with a 61-byte
 *   placeholder for the batch header; each record's timestamp is kept for its metadata.
 * RecordRef: (batch, index), the base of samsa.client.producer.RecordFuture, built without
 *   a Python-level __init__.
 *
 * Each has a pure-Python twin (records._PyRecords, producer._PyRecordRef): the reference,
 * and the fallback when this extension is not built; tests hold them to the same bytes.
 * Encoding a 100-byte record in Python costs ~7,000 instructions (varints, joins, a method
 * call) and a future's __init__ ~1,900; here a few hundred each.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define HEADER_SIZE 61

typedef struct {
    PyObject_HEAD
    PyObject *buf;              /* bytearray: its size is the capacity, `len` bytes used */
    Py_ssize_t len;
    Py_ssize_t count;
    long long base_timestamp;
    long long max_timestamp;
    long long *timestamps;      /* each record's, count of them */
    Py_ssize_t capacity;
} Records;

static long long
now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* zigzag varint of a signed 64-bit value; returns bytes written (at most 10) */
static inline Py_ssize_t
put_varint(unsigned char *out, long long value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

/* a bytes-like argument: bytes fast, any other buffer through the buffer protocol */
typedef struct {
    const char *data;
    Py_ssize_t len;
    Py_buffer view;
    int has_view;
    int is_null;
} Blob;

static int
blob_get(PyObject *obj, Blob *b, const char *what)
{
    b->has_view = 0;
    b->is_null = 0;
    if (obj == Py_None) {
        b->is_null = 1;
        b->data = NULL;
        b->len = 0;
        return 0;
    }
    if (PyBytes_CheckExact(obj)) {
        b->data = PyBytes_AS_STRING(obj);
        b->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "record %s must be bytes or None, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    b->has_view = 1;
    b->data = b->view.buf;
    b->len = b->view.len;
    return 0;
}

static void
blob_release(Blob *b)
{
    if (b->has_view) {
        PyBuffer_Release(&b->view);
        b->has_view = 0;
    }
}

/* Append n bytes at the end of the bytearray; returns a pointer to them. */
static char *
grow(PyObject *buf, Py_ssize_t n)
{
    Py_ssize_t old = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, old + n) < 0)
        return NULL;
    return PyByteArray_AS_STRING(buf) + old;
}

/* Room for n more bytes at the end of the records; the capacity doubles, so a batch is
 * copied about once while it grows (bytearray itself grows by 1/8, ~8 copies). */
static char *
reserve(Records *self, Py_ssize_t n)
{
    Py_ssize_t cap = PyByteArray_GET_SIZE(self->buf);
    if (self->len + n > cap) {
        Py_ssize_t want = cap * 2;
        if (want < self->len + n)
            want = self->len + n;
        if (want < 4096)
            want = 4096;
        if (PyByteArray_Resize(self->buf, want) < 0)
            return NULL;
    }
    char *p = PyByteArray_AS_STRING(self->buf) + self->len;
    self->len += n;
    return p;
}

static PyObject *
encode_headers(PyObject *headers)
{
    PyObject *seq = PySequence_Fast(headers, "record headers must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, 0);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    unsigned char tmp[10];
    char *p;
    Py_ssize_t k = put_varint(tmp, n);
    if ((p = grow(out, k)) == NULL)
        goto fail;
    memcpy(p, tmp, k);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *hk, *hv;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyObject *t = PySequence_Tuple(item);
            if (t == NULL)
                goto fail;
            if (PyTuple_GET_SIZE(t) != 2) {
                Py_DECREF(t);
                PyErr_SetString(PyExc_ValueError, "a record header is a (key, value) pair");
                goto fail;
            }
            hk = PyTuple_GET_ITEM(t, 0);
            hv = PyTuple_GET_ITEM(t, 1);
            Py_INCREF(hk);
            Py_INCREF(hv);
            Py_DECREF(t);
        } else {
            hk = PyTuple_GET_ITEM(item, 0);
            hv = PyTuple_GET_ITEM(item, 1);
            Py_INCREF(hk);
            Py_INCREF(hv);
        }
        Py_ssize_t klen;
        const char *kdata = PyUnicode_Check(hk) ? PyUnicode_AsUTF8AndSize(hk, &klen) : NULL;
        if (kdata == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a record header key must be str");
            Py_DECREF(hk);
            Py_DECREF(hv);
            goto fail;
        }
        Blob v;
        if (blob_get(hv, &v, "header value") < 0) {
            Py_DECREF(hk);
            Py_DECREF(hv);
            goto fail;
        }
        unsigned char lens[20];
        Py_ssize_t a = put_varint(lens, klen);
        Py_ssize_t b = put_varint(lens + a, v.is_null ? -1 : v.len);
        p = grow(out, a + klen + b + v.len);
        if (p != NULL) {
            memcpy(p, lens, a);
            memcpy(p + a, kdata, klen);
            memcpy(p + a + klen, lens + a, b);
            if (v.len)
                memcpy(p + a + klen + b, v.data, v.len);
        }
        blob_release(&v);
        Py_DECREF(hk);
        Py_DECREF(hv);
        if (p == NULL)
            goto fail;
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

static PyObject *
Records_append(Records *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError,
                        "append(timestamp, key, value, headers=()) takes 3 or 4 arguments");
        return NULL;
    }
    long long ts;
    if (args[0] == Py_None) {
        ts = now_ms();
    } else {
        ts = PyLong_AsLongLong(args[0]);
        if (ts == -1 && PyErr_Occurred())
            return NULL;
    }
    if (self->count == self->capacity) {
        Py_ssize_t cap = self->capacity ? self->capacity * 2 : 64;
        long long *grown = PyMem_Realloc(self->timestamps, cap * sizeof(long long));
        if (grown == NULL)
            return PyErr_NoMemory();
        self->timestamps = grown;
        self->capacity = cap;
    }
    PyObject *headers = nargs == 4 ? args[3] : NULL;
    PyObject *hbytes = NULL;
    if (headers != NULL && headers != Py_None) {
        int truth = PyObject_IsTrue(headers);
        if (truth < 0)
            return NULL;
        if (truth && (hbytes = encode_headers(headers)) == NULL)
            return NULL;
    }
    Blob key, value;
    if (blob_get(args[1], &key, "key") < 0) {
        Py_XDECREF(hbytes);
        return NULL;
    }
    if (blob_get(args[2], &value, "value") < 0) {
        blob_release(&key);
        Py_XDECREF(hbytes);
        return NULL;
    }
    Py_ssize_t i = self->count;
    long long delta;
    if (i) {
        delta = ts - self->base_timestamp;
    } else {
        delta = 0;
    }
    /* attributes, timestamp delta, offset delta, key length */
    unsigned char head[1 + 10 + 10 + 10];
    Py_ssize_t h = 0;
    head[h++] = 0;
    h += put_varint(head + h, delta);
    h += put_varint(head + h, i);
    h += put_varint(head + h, key.is_null ? -1 : key.len);
    unsigned char vlen[10];
    Py_ssize_t vl = put_varint(vlen, value.is_null ? -1 : value.len);
    const char *hdata = hbytes ? PyByteArray_AS_STRING(hbytes) : "\0";
    Py_ssize_t hlen = hbytes ? PyByteArray_GET_SIZE(hbytes) : 1;
    Py_ssize_t size = h + key.len + vl + value.len + hlen;
    unsigned char slen[10];
    Py_ssize_t sl = put_varint(slen, size);
    char *p = reserve(self, sl + size);
    if (p != NULL) {
        memcpy(p, slen, sl);
        p += sl;
        memcpy(p, head, h);
        p += h;
        if (key.len) {
            memcpy(p, key.data, key.len);
            p += key.len;
        }
        memcpy(p, vlen, vl);
        p += vl;
        if (value.len) {
            memcpy(p, value.data, value.len);
            p += value.len;
        }
        memcpy(p, hdata, hlen);
    }
    blob_release(&key);
    blob_release(&value);
    Py_XDECREF(hbytes);
    if (p == NULL)
        return NULL;
    if (i == 0) {
        self->base_timestamp = self->max_timestamp = ts;
    } else if (ts > self->max_timestamp) {
        self->max_timestamp = ts;
    }
    self->timestamps[i] = ts;
    self->count = i + 1;
    Py_RETURN_NONE;
}

static PyObject *
Records_timestamp(Records *self, PyObject *arg)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || i >= self->count) {
        PyErr_SetString(PyExc_IndexError, "no such record");
        return NULL;
    }
    return PyLong_FromLongLong(self->timestamps[i]);
}

static int
Records_init(Records *self, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "takes no arguments");
        return -1;
    }
    PyObject *buf = PyByteArray_FromStringAndSize(NULL, HEADER_SIZE);
    if (buf == NULL)
        return -1;
    memset(PyByteArray_AS_STRING(buf), 0, HEADER_SIZE);
    Py_XSETREF(self->buf, buf);
    self->len = HEADER_SIZE;
    self->count = 0;
    self->base_timestamp = self->max_timestamp = 0;
    return 0;
}

static int
Records_traverse(Records *self, visitproc visit, void *arg)
{
    Py_VISIT(self->buf);
    return 0;
}

static int
Records_clear(Records *self)
{
    Py_CLEAR(self->buf);
    return 0;
}

static void
Records_dealloc(Records *self)
{
    PyObject_GC_UnTrack(self);
    Records_clear(self);
    PyMem_Free(self->timestamps);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Records_get_buf(Records *self, void *closure)
{
    if (self->buf == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_buf");
        return NULL;
    }
    if (PyByteArray_GET_SIZE(self->buf) != self->len &&
            PyByteArray_Resize(self->buf, self->len) < 0)
        return NULL;
    Py_INCREF(self->buf);
    return self->buf;
}

static int
Records_set_buf(Records *self, PyObject *value, void *closure)
{
    if (value == NULL || !PyByteArray_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "_buf must be a bytearray");
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(self->buf, value);
    self->len = PyByteArray_GET_SIZE(value);
    return 0;
}

static PyMethodDef Records_methods[] = {
    {"append", (PyCFunction)(void (*)(void))Records_append, METH_FASTCALL,
     "append(timestamp, key, value, headers=())\n--\n\n"
     "Encode one record (CreateTime timestamp in ms, None: now) at the end of the batch."},
    {"timestamp", (PyCFunction)Records_timestamp, METH_O,
     "timestamp(index)\n--\n\nThe timestamp of record ``index``."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Records_members[] = {
    {"count", T_PYSSIZET, offsetof(Records, count), READONLY, "records appended"},
    {"base_timestamp", T_LONGLONG, offsetof(Records, base_timestamp), READONLY,
     "timestamp of the first record"},
    {"max_timestamp", T_LONGLONG, offsetof(Records, max_timestamp), READONLY,
     "highest record timestamp"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Records_getset[] = {
    {"_buf", (getter)Records_get_buf, (setter)Records_set_buf,
     "the batch so far: 61 header bytes, then the records", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecordsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "samsa._speedups.Records",
    .tp_basicsize = sizeof(Records),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Records of one v2 batch, encoded as they are appended.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Records_init,
    .tp_dealloc = (destructor)Records_dealloc,
    .tp_traverse = (traverseproc)Records_traverse,
    .tp_clear = (inquiry)Records_clear,
    .tp_methods = Records_methods,
    .tp_members = Records_members,
    .tp_getset = Records_getset,
};

/* ---- RecordRef ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *batch;
    Py_ssize_t index;
} RecordRef;

static PyObject *
RecordRef_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *batch;
    Py_ssize_t index;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "RecordRef(batch, index) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "On:RecordRef", &batch, &index))
        return NULL;
    RecordRef *self = (RecordRef *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(batch);
    self->batch = batch;
    self->index = index;
    return (PyObject *)self;
}

static int
RecordRef_traverse(RecordRef *self, visitproc visit, void *arg)
{
    Py_VISIT(self->batch);
    return 0;
}

static int
RecordRef_clear(RecordRef *self)
{
    Py_CLEAR(self->batch);
    return 0;
}

static void
RecordRef_dealloc(RecordRef *self)
{
    PyObject_GC_UnTrack(self);
    RecordRef_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef RecordRef_members[] = {
    {"_batch", T_OBJECT, offsetof(RecordRef, batch), READONLY, "the record's batch"},
    {"_index", T_PYSSIZET, offsetof(RecordRef, index), READONLY, "its place in the batch"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject RecordRefType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "samsa._speedups.RecordRef",
    .tp_basicsize = sizeof(RecordRef),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "RecordRef(batch, index): one record of a batch.",
    .tp_new = RecordRef_new,
    .tp_dealloc = (destructor)RecordRef_dealloc,
    .tp_traverse = (traverseproc)RecordRef_traverse,
    .tp_clear = (inquiry)RecordRef_clear,
    .tp_members = RecordRef_members,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "samsa._speedups",
    .m_doc = "The per-record hot path of samsa.Producer.send() in C (see the source).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&RecordsType) < 0 || PyType_Ready(&RecordRefType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Records", (PyObject *)&RecordsType) < 0 ||
            PyModule_AddObjectRef(m, "RecordRef", (PyObject *)&RecordRefType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
