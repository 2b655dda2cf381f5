/* samsa.spark._columnar: the Spark connector's per-record work in C.
 *
 * decode(): the records of v2 record batch bodies -> Arrow column buffers (offsets,
 *   timestamps, timestamp types, keys and values as binary arrays); headers are left to
 *   Python (their positions are returned).
 * encode(): rows of Arrow binary columns -> the records section of one v2 batch.
 * partitions(): the Java client's partition (murmur2) of each key of an Arrow binary column.
 *
 * Each has a pure-Python twin (numpy in samsa/spark/columnar.py; the client's encoder and
 * partitioner through samsa/spark/batches.py and produce.py): the fallback when this
 * extension is not built, and the reference the tests hold it to. Buffers come in and go out as bytes (wrapped by
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
    (void)self;
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

/* ---- encode ------------------------------------------------------------------------- */

/* An Arrow binary column: int32 offsets (n + 1 of them), data, validity bytes or none. */
typedef struct {
    Py_buffer off, data, valid;
    int has_valid;
    Py_ssize_t n;
} Column;

static void column_release(Column *c);

static int
column_get(PyObject *spec, Column *c, const char *name)
{
    PyObject *valid;
    memset(c, 0, sizeof(*c));
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3) {
        PyErr_Format(PyExc_TypeError, "%s: (offsets, data, validity or None) expected", name);
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(spec, 0), &c->off, PyBUF_SIMPLE) < 0)
        return -1;
    PyObject *data = PyTuple_GET_ITEM(spec, 1);
    if (data == Py_None) {  /* a list column: its offsets index another column */
        c->data.len = PY_SSIZE_T_MAX;
    }
    else if (PyObject_GetBuffer(data, &c->data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&c->off);
        return -1;
    }
    valid = PyTuple_GET_ITEM(spec, 2);
    if (valid != Py_None) {
        if (PyObject_GetBuffer(valid, &c->valid, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&c->off);
            PyBuffer_Release(&c->data);
            return -1;
        }
        c->has_valid = 1;
    }
    c->n = c->off.len / 4 - 1;
    const int32_t *o = c->off.buf;
    if (c->n < 0 || (c->has_valid && c->valid.len < c->n)) {
        PyErr_Format(PyExc_ValueError, "%s: bad offsets or validity", name);
        goto bad;
    }
    for (Py_ssize_t i = 0; i < c->n; i++) {
        if (o[i] < 0 || o[i] > o[i + 1] || o[i + 1] > c->data.len) {
            PyErr_Format(PyExc_ValueError, "%s: offsets outside the data", name);
            goto bad;
        }
    }
    return 0;
bad:
    column_release(c);
    c->n = -1;
    return -1;
}

static void
column_release(Column *c)
{
    if (c->off.obj != NULL)
        PyBuffer_Release(&c->off);
    if (c->data.obj != NULL)
        PyBuffer_Release(&c->data);
    if (c->has_valid)
        PyBuffer_Release(&c->valid);
    c->has_valid = 0;
}

/* Length of element i, or -1 when it is null. */
static inline int64_t
column_len(const Column *c, Py_ssize_t i)
{
    if (c->has_valid && !((const unsigned char *)c->valid.buf)[i])
        return -1;
    const int32_t *o = c->off.buf;
    return (int64_t)o[i + 1] - o[i];
}

static inline const unsigned char *
column_at(const Column *c, Py_ssize_t i)
{
    return (const unsigned char *)c->data.buf + ((const int32_t *)c->off.buf)[i];
}

static inline Py_ssize_t
varint_size(int64_t value)
{
    uint64_t v = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Size of row r's record after its length varint. */
static inline Py_ssize_t
record_size(const Column *keys, const Column *values, const Column *hlists,
            const Column *hkeys, const Column *hvalues, Py_ssize_t r, int64_t delta,
            int64_t ts_delta)
{
    int64_t klen = column_len(keys, r), vlen = column_len(values, r);
    Py_ssize_t size = 1 + varint_size(ts_delta) + varint_size(delta)
        + varint_size(klen) + (klen > 0 ? klen : 0) + varint_size(vlen) + (vlen > 0 ? vlen : 0);
    if (hlists == NULL) {
        return size + 1;
    }
    const int32_t *lo = hlists->off.buf;
    int64_t nh = column_len(hlists, r) > 0 ? lo[r + 1] - lo[r] : 0;
    size += varint_size(nh);
    for (int64_t h = lo[r]; h < lo[r] + nh; h++) {
        int64_t hk = column_len(hkeys, h), hv = column_len(hvalues, h);
        size += varint_size(hk) + (hk > 0 ? hk : 0) + varint_size(hv) + (hv > 0 ? hv : 0);
    }
    return size;
}

PyDoc_STRVAR(encode_doc,
"encode(rows, first_delta, ts_delta, keys, values, headers) -> bytes\n\n"
"The records section of a v2 batch holding the rows (int64 indexes) of binary columns\n"
"keys and values, each (int32 offsets, data, validity bytes or None); record i gets the\n"
"offset delta first_delta + i and the timestamp delta ts_delta. headers: None or\n"
"(lists, header keys, header values), three such columns (the lists' data is None: their\n"
"offsets index the headers; a null header key is written as an empty one).");

static PyObject *
encode(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer rowbuf;
    long long first_delta, ts_delta;
    PyObject *kspec, *vspec, *hspec;
    if (!PyArg_ParseTuple(args, "y*LLOOO", &rowbuf, &first_delta, &ts_delta, &kspec, &vspec,
                          &hspec))
        return NULL;
    PyObject *result = NULL;
    Column keys = {.n = -1}, values = {.n = -1}, hlists = {.n = -1}, hkeys = {.n = -1},
           hvalues = {.n = -1};
    Column *hl = NULL, *hk = NULL, *hv = NULL;
    const int64_t *rows = rowbuf.buf;
    Py_ssize_t nrows = rowbuf.len / 8;
    if (column_get(kspec, &keys, "keys") || column_get(vspec, &values, "values"))
        goto done;
    if (keys.n != values.n) {
        PyErr_SetString(PyExc_ValueError, "keys and values differ in length");
        goto done;
    }
    if (hspec != Py_None) {
        if (!PyTuple_Check(hspec) || PyTuple_GET_SIZE(hspec) != 3) {
            PyErr_SetString(PyExc_TypeError, "headers: (lists, keys, values) expected");
            goto done;
        }
        if (column_get(PyTuple_GET_ITEM(hspec, 1), &hkeys, "header keys")
            || column_get(PyTuple_GET_ITEM(hspec, 2), &hvalues, "header values")
            || column_get(PyTuple_GET_ITEM(hspec, 0), &hlists, "header lists"))
            goto done;
        if (hlists.n != keys.n || hkeys.n != hvalues.n) {
            PyErr_SetString(PyExc_ValueError, "headers do not match the rows");
            goto done;
        }
        /* The lists' offsets index the headers (hkeys and hvalues). */
        const int32_t *lo = hlists.off.buf;
        if (lo[hlists.n] > hkeys.n) {
            PyErr_SetString(PyExc_ValueError, "header lists index past the headers");
            goto done;
        }
        hl = &hlists;
        hk = &hkeys;
        hv = &hvalues;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < nrows; i++) {
        if (rows[i] < 0 || rows[i] >= keys.n) {
            PyErr_SetString(PyExc_IndexError, "row index out of range");
            goto done;
        }
        Py_ssize_t size = record_size(&keys, &values, hl, hk, hv, (Py_ssize_t)rows[i],
                                      first_delta + i, ts_delta);
        total += varint_size(size) + size;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL)
        goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < nrows; i++) {
        Py_ssize_t r = (Py_ssize_t)rows[i];
        Py_ssize_t size = record_size(&keys, &values, hl, hk, hv, r, first_delta + i,
                                      ts_delta);
        out += put_varint(out, size);
        *out++ = 0;  /* attributes */
        out += put_varint(out, ts_delta);
        out += put_varint(out, first_delta + i);
        int64_t klen = column_len(&keys, r), vlen = column_len(&values, r);
        out += put_varint(out, klen);
        if (klen > 0) {
            memcpy(out, column_at(&keys, r), (size_t)klen);
            out += klen;
        }
        out += put_varint(out, vlen);
        if (vlen > 0) {
            memcpy(out, column_at(&values, r), (size_t)vlen);
            out += vlen;
        }
        if (hl == NULL) {
            *out++ = 0;
            continue;
        }
        const int32_t *lo = hl->off.buf;
        int64_t nh = column_len(hl, r) > 0 ? lo[r + 1] - lo[r] : 0;
        out += put_varint(out, nh);
        for (int64_t h = lo[r]; h < lo[r] + nh; h++) {
            int64_t hkl = column_len(hk, h), hvl = column_len(hv, h);
            if (hkl < 0)
                hkl = 0;
            out += put_varint(out, hkl);
            memcpy(out, column_at(hk, h), (size_t)hkl);
            out += hkl;
            out += put_varint(out, hvl);
            if (hvl > 0) {
                memcpy(out, column_at(hv, h), (size_t)hvl);
                out += hvl;
            }
        }
    }
done:
    column_release(&keys);
    column_release(&values);
    column_release(&hlists);
    column_release(&hkeys);
    column_release(&hvalues);
    PyBuffer_Release(&rowbuf);
    return result;
}

/* ---- murmur2 ------------------------------------------------------------------------ */

/* Java's Utils.murmur2 (seed 0x9747b28c). */
static uint32_t
murmur2(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28c ^ (uint32_t)length;
    Py_ssize_t n4 = length / 4;
    for (Py_ssize_t i = 0; i < n4; i++) {
        uint32_t k;
        memcpy(&k, data + 4 * i, 4);  /* little-endian, as Java reads it */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        k = __builtin_bswap32(k);
#endif
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * n4;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

PyDoc_STRVAR(partitions_doc,
"partitions(keys, count) -> bytes\n\n"
"int32 partition of each key of a binary column (int32 offsets, data, validity bytes or\n"
"None): toPositive(murmur2(key)) % count as Kafka's Java client, -1 for a null key.");

static PyObject *
partitions(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *kspec;
    int count;
    if (!PyArg_ParseTuple(args, "Oi", &kspec, &count))
        return NULL;
    if (count <= 0) {
        PyErr_SetString(PyExc_ValueError, "count must be positive");
        return NULL;
    }
    Column keys = {.n = -1};
    if (column_get(kspec, &keys, "keys"))
        return NULL;
    PyObject *result = PyBytes_FromStringAndSize(NULL, keys.n * 4);
    if (result != NULL) {
        int32_t *out = (int32_t *)PyBytes_AS_STRING(result);
        for (Py_ssize_t i = 0; i < keys.n; i++) {
            int64_t len = column_len(&keys, i);
            out[i] = len < 0 ? -1
                : (int32_t)((murmur2(column_at(&keys, i), (Py_ssize_t)len) & 0x7fffffff)
                            % (uint32_t)count);
        }
    }
    column_release(&keys);
    return result;
}

/* ---- module ------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {"encode", encode, METH_VARARGS, encode_doc},
    {"partitions", partitions, METH_VARARGS, partitions_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "samsa.spark._columnar",
    "The Spark connector's per-record work in C (see samsa/spark/columnar.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__columnar(void)
{
    return PyModule_Create(&module);
}
