/* samsa.spark._columnar: the Spark connector's per-record work in C.
 *
 * decode(): the records of v2 record batch bodies -> Arrow column buffers (offsets,
 *   timestamps, timestamp types, keys and values as binary arrays); headers are left to
 *   Python (their positions are returned).
 * encode(): rows of Arrow binary columns -> the records section of one v2 batch.
 * murmur2(): the Java client's partition of each key of an Arrow binary column.
 *
 * Each has a pure-Python twin in samsa/spark/columnar.py and produce.py (numpy, or the
 * client's encoder and partitioner): the fallback when this extension is not built, and
 * the reference the tests hold it to. Buffers come in and go out as bytes (wrapped by
 * pyarrow without a copy); nothing here knows Arrow or numpy.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- varints ------------------------------------------------------------------------ */

/* Zigzag varint at *pos (< end); 0 on success, -1 when truncated or longer than 10 bytes. */
static inline int
get_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) {  /* the common one-byte case */
        uint64_t v = buf[p];
        *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
        *pos = p + 1;
        return 0;
    }
    uint64_t v = 0;
    int shift = 0;
    while (p < end) {
        unsigned char b = buf[p++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            *pos = p;
            return 0;
        }
        shift += 7;
        if (shift > 63)
            return -1;
    }
    return -1;
}

/* Zigzag varint of value at out; returns its size (at most 10). */
static inline Py_ssize_t
put_varint(unsigned char *out, int64_t value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

/* ---- growing output buffers (bytes objects, shrunk at the end) ------------------------- */

typedef struct {
    PyObject *obj;
    unsigned char *data;
} Out;

static int
out_new(Out *o, Py_ssize_t size)
{
    o->obj = PyBytes_FromStringAndSize(NULL, size > 0 ? size : 1);
    o->data = o->obj ? (unsigned char *)PyBytes_AS_STRING(o->obj) : NULL;
    return o->obj ? 0 : -1;
}

static int
out_finish(Out *o, Py_ssize_t size)
{
    if (PyBytes_GET_SIZE(o->obj) != size)
        return _PyBytes_Resize(&o->obj, size);
    return 0;
}

/* ---- decode ------------------------------------------------------------------------- */

/* One batch to decode: where its body is in the buffer and its header fields. */
typedef struct {
    int64_t pos, len, count, base_offset, base_ts, fixed_ts, ts_type;
} BatchMeta;

PyDoc_STRVAR(decode_doc,
"decode(buf, batches, start, until, headers) -> tuple\n\n"
"Records with start <= offset < until of the batch bodies in buf. batches: int64 rows of\n"
"(body position, body length, record count, base offset, base timestamp, LogAppendTime or\n"
"-1, timestamp type). Returns (rows, offsets int64, timestamps int64 us, types int32,\n"
"key offsets int32, key data, key validity or None, value offsets, value data, value\n"
"validity or None, header positions int64 or None, header counts int32 or None) as bytes.\n"
"Raises ValueError naming the batch for a record that does not fit its batch.");

static PyObject *
decode(PyObject *self, PyObject *args)
{
    Py_buffer buf, meta;
    long long start, until;
    int want_headers;
    if (!PyArg_ParseTuple(args, "y*y*LLp", &buf, &meta, &start, &until, &want_headers))
        return NULL;
    PyObject *result = NULL;
    Out offsets = {0}, stamps = {0}, types = {0}, koff = {0}, kdata = {0}, kvalid = {0},
        voff = {0}, vdata = {0}, vvalid = {0}, hpos = {0}, hcount = {0};
    const unsigned char *data = buf.buf;
    Py_ssize_t nbatches = meta.len / (Py_ssize_t)sizeof(BatchMeta);
    const BatchMeta *batches = meta.buf;
    Py_ssize_t cap = 0, bytes_cap = 0;
    for (Py_ssize_t i = 0; i < nbatches; i++) {
        const BatchMeta *b = &batches[i];
        if (b->pos < 0 || b->len < 0 || b->count < 0 || b->pos + b->len > buf.len) {
            PyErr_SetString(PyExc_ValueError, "batch body outside the buffer");
            goto done;
        }
        cap += (Py_ssize_t)b->count;
        bytes_cap += (Py_ssize_t)b->len;
    }
    if (bytes_cap > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "record set larger than 2 GiB");
        goto done;
    }
    Py_ssize_t bits = cap / 8 + 1;
    if (out_new(&offsets, cap * 8) || out_new(&stamps, cap * 8) || out_new(&types, cap * 4)
        || out_new(&koff, (cap + 1) * 4) || out_new(&kdata, bytes_cap)
        || out_new(&kvalid, bits) || out_new(&voff, (cap + 1) * 4)
        || out_new(&vdata, bytes_cap) || out_new(&vvalid, bits))
        goto done;
    if (want_headers && (out_new(&hpos, cap * 8) || out_new(&hcount, cap * 4)))
        goto done;
    memset(kvalid.data, 0, bits);
    memset(vvalid.data, 0, bits);
    int64_t *o_off = (int64_t *)offsets.data, *o_ts = (int64_t *)stamps.data;
    int32_t *o_type = (int32_t *)types.data, *o_koff = (int32_t *)koff.data;
    int32_t *o_voff = (int32_t *)voff.data;
    int64_t *o_hpos = want_headers ? (int64_t *)hpos.data : NULL;
    int32_t *o_hcount = want_headers ? (int32_t *)hcount.data : NULL;
    Py_ssize_t n = 0, klen_total = 0, vlen_total = 0, knulls = 0, vnulls = 0;
    o_koff[0] = o_voff[0] = 0;
    for (Py_ssize_t i = 0; i < nbatches; i++) {
        const BatchMeta *b = &batches[i];
        Py_ssize_t pos = (Py_ssize_t)b->pos, end = pos + (Py_ssize_t)b->len;
        const char *why = NULL;
        for (int64_t r = 0; r < b->count; r++) {
            int64_t len, ts_delta, off_delta, klen, vlen, nh;
            if (get_varint(data, &pos, end, &len) || len < 0 || len > end - pos) {
                why = "record length";
                break;
            }
            Py_ssize_t rend = pos + (Py_ssize_t)len;
            pos++;  /* attributes */
            if (get_varint(data, &pos, rend, &ts_delta)
                || get_varint(data, &pos, rend, &off_delta)
                || get_varint(data, &pos, rend, &klen)) {
                why = "record fields";
                break;
            }
            Py_ssize_t kat = pos;
            if (klen > 0) {
                if (klen > rend - pos) {
                    why = "key";
                    break;
                }
                pos += (Py_ssize_t)klen;
            }
            if (get_varint(data, &pos, rend, &vlen)) {
                why = "record fields";
                break;
            }
            Py_ssize_t vat = pos;
            if (vlen > 0) {
                if (vlen > rend - pos) {
                    why = "value";
                    break;
                }
                pos += (Py_ssize_t)vlen;
            }
            if (get_varint(data, &pos, rend, &nh)) {
                why = "header count";
                break;
            }
            int64_t offset = b->base_offset + off_delta;
            if (offset >= start && offset < until) {
                o_off[n] = offset;
                int64_t ms = b->fixed_ts >= 0 ? b->fixed_ts : b->base_ts + ts_delta;
                o_ts[n] = (int64_t)((uint64_t)ms * 1000u);
                o_type[n] = (int32_t)b->ts_type;
                if (klen >= 0) {
                    memcpy(kdata.data + klen_total, data + kat, (size_t)klen);
                    klen_total += (Py_ssize_t)klen;
                    kvalid.data[n >> 3] |= (unsigned char)(1u << (n & 7));
                } else {
                    knulls++;
                }
                if (vlen >= 0) {
                    memcpy(vdata.data + vlen_total, data + vat, (size_t)vlen);
                    vlen_total += (Py_ssize_t)vlen;
                    vvalid.data[n >> 3] |= (unsigned char)(1u << (n & 7));
                } else {
                    vnulls++;
                }
                o_koff[n + 1] = (int32_t)klen_total;
                o_voff[n + 1] = (int32_t)vlen_total;
                if (want_headers) {
                    o_hpos[n] = (int64_t)pos;
                    o_hcount[n] = (int32_t)nh;
                }
                n++;
            }
            pos = rend;
        }
        if (!why && pos != end)
            why = "record lengths that do not add up to the batch size";
        if (why) {
            PyErr_Format(PyExc_ValueError, "bad record in batch at offset %lld (%s)",
                         (long long)b->base_offset, why);
            goto done;
        }
    }
    if (out_finish(&offsets, n * 8) || out_finish(&stamps, n * 8)
        || out_finish(&types, n * 4) || out_finish(&koff, (n + 1) * 4)
        || out_finish(&kdata, klen_total) || out_finish(&voff, (n + 1) * 4)
        || out_finish(&vdata, vlen_total) || out_finish(&kvalid, (n + 7) / 8)
        || out_finish(&vvalid, (n + 7) / 8))
        goto done;
    if (want_headers && (out_finish(&hpos, n * 8) || out_finish(&hcount, n * 4)))
        goto done;
    result = Py_BuildValue(
        "nOOOOOOOOOOO", n, offsets.obj, stamps.obj, types.obj, koff.obj, kdata.obj,
        knulls ? kvalid.obj : Py_None, voff.obj, vdata.obj, vnulls ? vvalid.obj : Py_None,
        want_headers ? hpos.obj : Py_None, want_headers ? hcount.obj : Py_None);
done:
    Py_XDECREF(offsets.obj);
    Py_XDECREF(stamps.obj);
    Py_XDECREF(types.obj);
    Py_XDECREF(koff.obj);
    Py_XDECREF(kdata.obj);
    Py_XDECREF(kvalid.obj);
    Py_XDECREF(voff.obj);
    Py_XDECREF(vdata.obj);
    Py_XDECREF(vvalid.obj);
    Py_XDECREF(hpos.obj);
    Py_XDECREF(hcount.obj);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&meta);
    return result;
}

/* ---- module ------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "samsa.spark._columnar",
    "The Spark connector's per-record work in C (see samsa/spark/columnar.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__columnar(void)
{
    return PyModule_Create(&module);
}
