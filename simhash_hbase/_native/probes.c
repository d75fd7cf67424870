/* Page and cell kernels in C: one query's probes of the embedded store.
 *
 * encode_prefixes, bucket_keys, bucket_nums, mark_prefixes: one query's probes
 * of the embedded store and its prefix filters (codec.encode_prefixes,
 * store/lmdb: probes.bucket_keys/bucket_nums, filters.mark_prefixes; the
 * references, compared in tests/test_native_probe.py), so that a query makes
 * a few C calls instead of ~100 Python ones. bucket_keys also prefetches the
 * pages LMDB's searches of the buckets will read, bucket_nums those of the
 * names rows where there are two or more (probes.Trees: a walk of LMDB 0.9's
 * page layout that decides no answer; lmdb_leaves shows tests where it ends).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* ------------------------------------------------------------------ */
/* One query's probes of the embedded store (store/lmdb/probes.py)    */
/* ------------------------------------------------------------------ */

/* codec.encode_prefixes: (fp << 40) >> r & m in 64 bits, which is exact for a
 * mask m below 2**40 (a 5-byte prefix): only bits under bit 40 are kept. */
static int
prefix_term(uint64_t fp, PyObject *r_obj, PyObject *m_obj, uint64_t *out)
{
    unsigned long long r = PyLong_AsUnsignedLongLong(r_obj);
    unsigned long long m = PyLong_AsUnsignedLongLong(m_obj);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (m >> 40) {
        PyErr_SetString(PyExc_ValueError, "a prefix term's mask exceeds 40 bits");
        return -1;
    }
    *out = (r >= 40 ? (r - 40 >= 64 ? 0 : fp >> (r - 40)) : fp << (40 - r)) & m;
    return 0;
}

static PyObject *
encode_prefixes(PyObject *self, PyObject *args)
{
    unsigned long long fp;
    PyObject *terms;
    if (!PyArg_ParseTuple(args, "KO:encode_prefixes", &fp, &terms)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(terms, "prefix terms must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        uint64_t a, b;
        unsigned long long flag;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) {
            PyErr_SetString(PyExc_TypeError, "a prefix term is a tuple (r1, m1, r2, m2, flag)");
            Py_CLEAR(result);
            break;
        }
        flag = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 4));
        if ((flag == (unsigned long long)-1 && PyErr_Occurred()) ||
            prefix_term(fp, PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1), &a) < 0 ||
            prefix_term(fp, PyTuple_GET_ITEM(t, 2), PyTuple_GET_ITEM(t, 3), &b) < 0) {
            Py_CLEAR(result);
            break;
        }
        if (flag >> 40) {
            PyErr_SetString(PyExc_ValueError, "a prefix term's flag exceeds 40 bits");
            Py_CLEAR(result);
            break;
        }
        uint64_t v = a | b | flag;
        unsigned char buf[5];
        for (int j = 4; j >= 0; j--, v >>= 8) {
            buf[j] = (unsigned char)(v & 0xFF);
        }
        PyObject *item = PyBytes_FromStringAndSize((const char *)buf, 5);
        if (item == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, item);
    }
    Py_DECREF(seq);
    return result;
}

#define PREFIX_BYTES 5
#define CELL_BYTES 6
#define MAX_PROBES 64

/* The prefixes of a query as C bytes: at most MAX_PROBES of PREFIX_BYTES each. */
static int
read_prefixes(PyObject *prefixes, const unsigned char **out, Py_ssize_t *n)
{
    if (!PyList_Check(prefixes)) {
        PyErr_SetString(PyExc_TypeError, "prefixes must be a list of bytes");
        return -1;
    }
    *n = PyList_GET_SIZE(prefixes);
    if (*n > MAX_PROBES) {
        PyErr_SetString(PyExc_ValueError, "too many prefixes for one query");
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *p = PyList_GET_ITEM(prefixes, i);
        if (!PyBytes_Check(p) || PyBytes_GET_SIZE(p) != PREFIX_BYTES) {
            PyErr_SetString(PyExc_ValueError, "a scan prefix is 5 bytes");
            return -1;
        }
        out[i] = (const unsigned char *)PyBytes_AS_STRING(p);
    }
    return 0;
}

/* A prefix's bucket key: its flag, then the top two bytes of its field. */
static void
bucket_key(const unsigned char *p, unsigned char *key)
{
    key[0] = p[4];
    key[1] = p[0];
    key[2] = p[1];
}

#define SPREAD 0x9E3779B97F4A7C15ULL /* filters._SPREAD */

/* filters.PrefixFilter.slot: the shift must leave 3 to 40 bits (set by read_shift). */
static uint64_t
filter_slot(uint64_t value, int shift)
{
    return value * SPREAD >> shift;
}

/* A filter's shift, checked against the size of its bits (bytes). */
static int
read_shift(PyObject *obj, Py_ssize_t size, int *shift)
{
    long s = PyLong_AsLong(obj);
    if (s == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (s < 24 || s > 61 || (uint64_t)size < (1ULL << (64 - s)) / 8) {
        PyErr_SetString(PyExc_ValueError, "a prefix filter's bits do not cover its shift");
        return -1;
    }
    *shift = (int)s;
    return 0;
}

/* A PrefixFilter (shift, bits): its shift and bytes, or NULL bits for None. */
static int
read_filter(PyObject *filter, int *shift, const unsigned char **bits, Py_ssize_t *size)
{
    *bits = NULL;
    if (filter == Py_None) {
        return 0;
    }
    if (!PyTuple_Check(filter) || PyTuple_GET_SIZE(filter) != 2) {
        PyErr_SetString(PyExc_TypeError, "a prefix filter is (shift, bits) or None");
        return -1;
    }
    PyObject *b = PyTuple_GET_ITEM(filter, 1);
    if (PyBytes_Check(b)) {
        *bits = (const unsigned char *)PyBytes_AS_STRING(b);
        *size = PyBytes_GET_SIZE(b);
    } else if (PyByteArray_Check(b)) {
        *bits = (const unsigned char *)PyByteArray_AS_STRING(b);
        *size = PyByteArray_GET_SIZE(b);
    } else {
        PyErr_SetString(PyExc_TypeError, "a prefix filter's bits are bytes or a bytearray");
        return -1;
    }
    return read_shift(PyTuple_GET_ITEM(filter, 0), *size, shift);
}

/* ------------------------------------------------------------------ */
/* Prefetching the pages of LMDB searches (probes.Trees)              */
/* ------------------------------------------------------------------ */

/* LMDB 0.9's page layout (mdb.c: MDB_page, MDB_node), read only to prefetch:
 * nothing read here decides an answer, LMDB still does every search. Each page
 * read is first checked to lie in the file and to name itself (its header
 * holds its own number), each node to lie in its page. */
#define LM_HEADER 16   /* PAGEHDRSZ: number (8), pad (2), flags (2), lower (2), upper (2) */
#define LM_BRANCH 0x01 /* P_BRANCH */
#define LM_LEAF 0x02   /* P_LEAF */
#define LM_NODE 8      /* a node's header: data size lo, hi (or child page), flags, key size */
#define LM_BIGDATA 0x01 /* F_BIGDATA: the value is on overflow pages */
#define LM_MAX_DEPTH 32
#define LM_NONE UINT64_MAX
#define LM_VALUE_LINES 16 /* of a leaf value, the first this many cache lines are fetched */

typedef struct {
    const unsigned char *base; /* where this process maps the file */
    uint64_t pages;            /* pages the file held (it never shrinks) */
    uint32_t psize;
} lm_map;

static unsigned
lm_u16(const unsigned char *at)
{
    uint16_t v;
    memcpy(&v, at, 2);
    return v;
}

/* Page pgno, or NULL where it is past the file or does not name itself. */
static const unsigned char *
lm_page(const lm_map *m, uint64_t pgno)
{
    if (pgno >= m->pages) {
        return NULL;
    }
    const unsigned char *p = m->base + pgno * m->psize;
    uint64_t own;
    memcpy(&own, p, 8);
    return own == pgno ? p : NULL;
}

static unsigned
lm_count(const lm_map *m, const unsigned char *p)
{
    unsigned lower = lm_u16(p + 12);
    return lower < LM_HEADER || lower > m->psize ? 0 : (lower - LM_HEADER) >> 1;
}

/* Node i of page p (and its key size), NULL where it would leave the page. */
static const unsigned char *
lm_node(const lm_map *m, const unsigned char *p, unsigned i, unsigned *ksize)
{
    unsigned off = lm_u16(p + LM_HEADER + 2 * i);
    if (off < LM_HEADER || off + LM_NODE > m->psize) {
        return NULL;
    }
    *ksize = lm_u16(p + off + 6);
    return off + LM_NODE + *ksize <= m->psize ? p + off : NULL;
}

/* mdb_cmp_memn: the bytes, then the length */
static int
lm_cmp(const unsigned char *a, unsigned alen, const unsigned char *b, unsigned blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (int)alen - (int)blen;
}

/* The child page a key descends to from branch page p: that of the last node
 * whose key is <= the key (node 0 stands for all keys below node 1's). */
static uint64_t
lm_child(const lm_map *m, const unsigned char *p, const unsigned char *key, unsigned klen)
{
    unsigned n = lm_count(m, p), ks, lo = 1, hi = n, at = 0; /* search [lo, hi) */
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        const unsigned char *node = lm_node(m, p, mid, &ks);
        if (node == NULL) {
            return LM_NONE;
        }
        if (lm_cmp(key, klen, node + LM_NODE, ks) >= 0) {
            at = mid;
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    const unsigned char *node = n ? lm_node(m, p, at, &ks) : NULL;
    if (node == NULL) {
        return LM_NONE;
    }
    return (uint64_t)lm_u16(node) | (uint64_t)lm_u16(node + 2) << 16 | (uint64_t)lm_u16(node + 4) << 32;
}

/* Prefetch the first line of each node of page p (its search reads their keys). */
static void
lm_fetch_nodes(const lm_map *m, const unsigned char *p)
{
    unsigned n = lm_count(m, p), last = UINT_MAX;
    for (unsigned i = 0; i < n; i++) {
        unsigned off = lm_u16(p + LM_HEADER + 2 * i);
        if (off < m->psize && off >> 6 != last) { /* a line once (a run of small nodes shares one) */
            last = off >> 6;
            __builtin_prefetch(p + off);
        }
    }
}

/* Prefetch the value of key in leaf p (where it is there, and not on overflow pages). */
static void
lm_fetch_value(const lm_map *m, const unsigned char *p, const unsigned char *key, unsigned klen)
{
    unsigned ks, lo = 0, hi = lm_count(m, p);
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        const unsigned char *node = lm_node(m, p, mid, &ks);
        if (node == NULL) {
            return;
        }
        int c = lm_cmp(key, klen, node + LM_NODE, ks);
        if (c == 0) {
            if (lm_u16(node + 4) & LM_BIGDATA) {
                return;
            }
            size_t start = (size_t)(node - p) + LM_NODE + ks;
            size_t end = start + (lm_u16(node) | (size_t)lm_u16(node + 2) << 16);
            if (end > m->psize) {
                end = m->psize;
            }
            for (size_t at = start, k = 0; at < end && k < LM_VALUE_LINES; at += 64, k++) {
                __builtin_prefetch(p + at);
            }
            return;
        }
        if (c > 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
}

/* Each key's search from its root, all keys a level at a time: the pages of a
 * level are prefetched (their nodes' first lines) before any is searched, so
 * that the cache misses of the keys' searches overlap instead of coming one
 * after another; at the leaves, each key's value. at[i] ends as the leaf page
 * key i's search reaches, or LM_NONE. */
static void
lm_descend(const lm_map *m, uint64_t *at, const unsigned char *const *keys, const unsigned *klens, Py_ssize_t n)
{
    for (int level = 0; level < LM_MAX_DEPTH; level++) {
        int branches = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            const unsigned char *p = at[i] == LM_NONE ? NULL : lm_page(m, at[i]);
            if (p == NULL) {
                at[i] = LM_NONE;
            } else if (lm_u16(p + 10) & LM_BRANCH) {
                at[i] = lm_child(m, p, keys[i], klens[i]);
                if (at[i] < m->pages) {
                    const unsigned char *c = m->base + at[i] * m->psize;
                    __builtin_prefetch(c);
                    __builtin_prefetch(c + 64);
                    branches = 1;
                }
            }
        }
        if (!branches) {
            break;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            const unsigned char *p = at[i] == LM_NONE ? NULL : lm_page(m, at[i]);
            if (p != NULL) {
                lm_fetch_nodes(m, p);
            }
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *p = at[i] == LM_NONE ? NULL : lm_page(m, at[i]);
        if (p != NULL && lm_u16(p + 10) & LM_LEAF) {
            lm_fetch_value(m, p, keys[i], klens[i]);
        } else {
            at[i] = LM_NONE;
        }
    }
}

#define LM_TREES "trees are (base, pages, psize, index root, fresh root, names root)"
#define LM_ROOTS 3

/* A probes.Trees: the map, and the roots (index, fresh, names). */
static int
read_trees(PyObject *trees, lm_map *m, uint64_t roots[LM_ROOTS])
{
    unsigned long long base, pages, psize;
    if (!PyTuple_Check(trees) ||
        !PyArg_ParseTuple(trees, "KKKKKK;" LM_TREES, &base, &pages, &psize, &roots[0], &roots[1], &roots[2])) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, LM_TREES);
        }
        return -1;
    }
    if (base == 0 || psize < 512 || psize > 65536 || (psize & (psize - 1)) || pages > UINT64_MAX / psize) {
        PyErr_SetString(PyExc_ValueError, "trees: no map, or a bad page size");
        return -1;
    }
    m->base = (const unsigned char *)(uintptr_t)base;
    m->pages = pages;
    m->psize = (uint32_t)psize;
    return 0;
}

/* lmdb_leaves(trees, table, keys): the leaf page (number) each key's search
 * from a table's root (0: index, 1: fresh, 2: names) reaches, None where the
 * walk met no leaf: how tests check the walk against LMDB's own searches. */
static PyObject *
lmdb_leaves(PyObject *self, PyObject *args)
{
    PyObject *trees, *list;
    int table;
    lm_map m;
    uint64_t roots[LM_ROOTS], at[MAX_PROBES];
    const unsigned char *keys[MAX_PROBES] = {NULL};
    unsigned klens[MAX_PROBES] = {0};
    if (!PyArg_ParseTuple(args, "OiO!:lmdb_leaves", &trees, &table, &PyList_Type, &list) ||
        read_trees(trees, &m, roots) < 0) {
        return NULL;
    }
    if (table < 0 || table >= LM_ROOTS) {
        PyErr_SetString(PyExc_ValueError, "table is 0 (index), 1 (fresh) or 2 (names)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n > MAX_PROBES) {
        PyErr_SetString(PyExc_ValueError, "too many keys");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "keys are bytes");
            return NULL;
        }
        keys[i] = (const unsigned char *)PyBytes_AS_STRING(k);
        klens[i] = (unsigned)PyBytes_GET_SIZE(k);
        at[i] = roots[table];
    }
    lm_descend(&m, at, keys, klens, n);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *v = at[i] == LM_NONE ? Py_NewRef(Py_None) : PyLong_FromUnsignedLongLong(at[i]);
        if (v == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* A prefix's value: its 5 bytes, big-endian (filters.PrefixFilter.slot). */
static uint64_t
prefix_value(const unsigned char *prefix)
{
    uint64_t v = 0;
    for (int j = 0; j < PREFIX_BYTES; j++) {
        v = v << 8 | prefix[j];
    }
    return v;
}

/* probes.bucket_keys; given trees (probes.Trees), the pages of the searches
 * of the keys asked are prefetched, the bits of the filters first: the cache
 * misses of the ten probes overlap (the answer is the same). */
static PyObject *
bucket_keys(PyObject *self, PyObject *args)
{
    PyObject *prefixes, *filters[2], *trees = Py_None;
    int shift[2] = {0, 0};
    const unsigned char *bits[2];
    Py_ssize_t size[2] = {0, 0};
    const unsigned char *p[MAX_PROBES];
    unsigned char keys[MAX_PROBES][3];
    uint64_t slot[2][MAX_PROBES];
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOO|O:bucket_keys", &prefixes, &filters[0], &filters[1], &trees) ||
        read_prefixes(prefixes, p, &n) < 0 ||
        read_filter(filters[0], &shift[0], &bits[0], &size[0]) < 0 ||
        read_filter(filters[1], &shift[1], &bits[1], &size[1]) < 0) {
        return NULL;
    }
    lm_map m;
    uint64_t roots[LM_ROOTS];
    if (trees != Py_None && read_trees(trees, &m, roots) < 0) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        bucket_key(p[i], keys[i]);
        for (Py_ssize_t j = 0; j < i; j++) {
            if (memcmp(keys[i], keys[j], 3) == 0) {
                Py_RETURN_NONE; /* two prefixes of one bucket */
            }
        }
    }
    for (int t = 0; t < 2; t++) {
        for (Py_ssize_t i = 0; bits[t] != NULL && i < n; i++) {
            slot[t][i] = filter_slot(prefix_value(p[i]), shift[t]);
            __builtin_prefetch(bits[t] + (slot[t][i] >> 3));
        }
    }
    /* asking: the keys each tier is asked, as (tier, prefix); their searches' pages */
    int tier_of[2 * MAX_PROBES];
    Py_ssize_t prefix_of[2 * MAX_PROBES], asking = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        for (int t = 0; t < 2; t++) {
            uint64_t h = slot[t][i];
            if (bits[t] == NULL || bits[t][h >> 3] >> (h & 7) & 1) {
                tier_of[asking] = t;
                prefix_of[asking++] = i;
            }
        }
    }
    if (trees != Py_None) {
        uint64_t at[2 * MAX_PROBES];
        const unsigned char *searched[2 * MAX_PROBES];
        unsigned klens[2 * MAX_PROBES];
        for (Py_ssize_t a = 0; a < asking; a++) {
            at[a] = roots[tier_of[a]];
            searched[a] = keys[prefix_of[a]];
            klens[a] = 3;
        }
        lm_descend(&m, at, searched, klens, asking);
    }
    PyObject *asked[2] = {PyList_New(0), PyList_New(0)};
    if (asked[0] == NULL || asked[1] == NULL) {
        goto fail;
    }
    for (Py_ssize_t a = 0; a < asking; a++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)keys[prefix_of[a]], 3);
        if (key == NULL || PyList_Append(asked[tier_of[a]], key) < 0) {
            Py_XDECREF(key);
            goto fail;
        }
        Py_DECREF(key);
    }
    PyObject *result = PyTuple_Pack(2, asked[0], asked[1]);
    Py_DECREF(asked[0]);
    Py_DECREF(asked[1]);
    return result;
fail:
    Py_XDECREF(asked[0]);
    Py_XDECREF(asked[1]);
    return NULL;
}

/* filters.mark_prefixes */
static PyObject *
mark_prefixes(PyObject *self, PyObject *args)
{
    PyObject *bits_obj, *shift_obj, *chunk;
    int shift;
    if (!PyArg_ParseTuple(args, "YOO!:mark_prefixes", &bits_obj, &shift_obj, &PyList_Type, &chunk) ||
        read_shift(shift_obj, PyByteArray_GET_SIZE(bits_obj), &shift) < 0) {
        return NULL;
    }
    unsigned char *bits = (unsigned char *)PyByteArray_AS_STRING(bits_obj);
    for (Py_ssize_t f = 0; f < PyList_GET_SIZE(chunk); f++) {
        PyObject *pair = PyList_GET_ITEM(chunk, f);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyBytes_Check(PyTuple_GET_ITEM(pair, 0)) || PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 0)) != 3 ||
            !PyBytes_Check(PyTuple_GET_ITEM(pair, 1))) {
            PyErr_SetString(PyExc_TypeError, "a chunk is a list of (3-byte key, packed cells)");
            return NULL;
        }
        const unsigned char *key = (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(pair, 0));
        const unsigned char *cells = (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(pair, 1));
        Py_ssize_t len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1));
        /* a prefix: the key's field bytes, the cell's two, then the key's flag */
        uint64_t head = ((uint64_t)key[1] << 32 | (uint64_t)key[2] << 24) | key[0];
        for (Py_ssize_t at = 0; at + CELL_BYTES <= len; at += CELL_BYTES) {
            uint64_t h = filter_slot(head | (uint64_t)cells[at] << 16 | (uint64_t)cells[at + 1] << 8, shift);
            bits[h >> 3] |= (unsigned char)(1u << (h & 7));
        }
    }
    Py_RETURN_NONE;
}

/* probes.bucket_nums */
static PyObject *
bucket_nums(PyObject *self, PyObject *args)
{
    static const unsigned char spilled[4] = {0xFF, 0xFF, 0xFF, 0xFF};
    PyObject *prefixes, *found, *cap_obj, *trees = Py_None;
    const unsigned char *p[MAX_PROBES];
    unsigned char keys[MAX_PROBES][3];
    Py_ssize_t per_prefix[MAX_PROBES] = {0};
    Py_ssize_t n, cap = PY_SSIZE_T_MAX;
    lm_map m;
    uint64_t roots[LM_ROOTS];
    if (!PyArg_ParseTuple(args, "OOO|O:bucket_nums", &prefixes, &found, &cap_obj, &trees) ||
        read_prefixes(prefixes, p, &n) < 0 || (trees != Py_None && read_trees(trees, &m, roots) < 0)) {
        return NULL;
    }
    if (cap_obj != Py_None) {
        cap = PyLong_AsSsize_t(cap_obj);
        if (cap == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (cap < 1) {
            PyErr_SetString(PyExc_ValueError, "row_cap is 1 or more");
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        bucket_key(p[i], keys[i]);
    }
    if (!PyList_Check(found)) {
        PyErr_SetString(PyExc_TypeError, "found must be a list of (key, cells)");
        return NULL;
    }
    PyObject *nums = PyList_New(0), *where = PyDict_New(), *result = NULL;
    Py_ssize_t *count = NULL, room = 0;
    if (nums == NULL || where == NULL) {
        goto done;
    }
    int spill = 0;
    for (Py_ssize_t f = 0; f < PyList_GET_SIZE(found); f++) {
        PyObject *pair = PyList_GET_ITEM(found, f);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyBytes_Check(PyTuple_GET_ITEM(pair, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(pair, 1))) {
            PyErr_SetString(PyExc_TypeError, "found must be a list of (key, cells)");
            goto done;
        }
        PyObject *key = PyTuple_GET_ITEM(pair, 0);
        Py_ssize_t i = 0;
        while (i < n && !(PyBytes_GET_SIZE(key) == 3 && memcmp(PyBytes_AS_STRING(key), keys[i], 3) == 0)) {
            i++;
        }
        if (i == n) {
            PyErr_SetObject(PyExc_KeyError, key);
            goto done;
        }
        const unsigned char *lead = p[i] + 2;
        PyObject *packed = PyTuple_GET_ITEM(pair, 1);
        const unsigned char *cells = (const unsigned char *)PyBytes_AS_STRING(packed);
        Py_ssize_t size = PyBytes_GET_SIZE(packed);
        for (Py_ssize_t at = 0; at + 2 <= size; at += CELL_BYTES) {
            if (cells[at] != lead[0] || cells[at + 1] != lead[1]) {
                continue;
            }
            Py_ssize_t len = size - at - 2 < 4 ? size - at - 2 : 4; /* a cut cell: its bytes */
            per_prefix[i]++;
            spill |= len == 4 && memcmp(cells + at + 2, spilled, 4) == 0;
            PyObject *num = PyBytes_FromStringAndSize((const char *)cells + at + 2, len);
            if (num == NULL) {
                goto done;
            }
            PyObject *slot = PyDict_GetItemWithError(where, num); /* borrowed */
            Py_ssize_t k = PyList_GET_SIZE(nums);
            if (slot != NULL) {
                k = PyLong_AsSsize_t(slot);
            } else if (PyErr_Occurred() || PyList_Append(nums, num) < 0) {
                Py_DECREF(num);
                goto done;
            } else {
                PyObject *index = PyLong_FromSsize_t(k);
                int bad = index == NULL || PyDict_SetItem(where, num, index) < 0;
                Py_XDECREF(index);
                if (bad) {
                    Py_DECREF(num);
                    goto done;
                }
                if (k == room) {
                    room = room ? 2 * room : 16;
                    Py_ssize_t *more = PyMem_Realloc(count, room * sizeof(Py_ssize_t));
                    if (more == NULL) {
                        PyErr_NoMemory();
                        Py_DECREF(num);
                        goto done;
                    }
                    count = more;
                }
                count[k] = 0;
            }
            Py_DECREF(num);
            count[k]++;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        spill |= per_prefix[i] >= cap;
    }
    if (trees != Py_None && !spill && PyList_GET_SIZE(nums) >= 2) {
        /* two numbers or more: their names searches, overlapped (one has nothing to
         * overlap, and its walk cost more than it saved) */
        uint64_t at[MAX_PROBES];
        const unsigned char *searched[MAX_PROBES];
        unsigned klens[MAX_PROBES];
        Py_ssize_t walked = PyList_GET_SIZE(nums) < MAX_PROBES ? PyList_GET_SIZE(nums) : MAX_PROBES;
        for (Py_ssize_t k = 0; k < walked; k++) {
            at[k] = roots[2];
            searched[k] = (const unsigned char *)PyBytes_AS_STRING(PyList_GET_ITEM(nums, k));
            klens[k] = (unsigned)PyBytes_GET_SIZE(PyList_GET_ITEM(nums, k));
        }
        lm_descend(&m, at, searched, klens, walked);
    }
    if (spill) { /* a lead marked spilled, or a row the cap may cut */
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    PyObject *counts = PyList_New(PyList_GET_SIZE(nums));
    for (Py_ssize_t k = 0; counts != NULL && k < PyList_GET_SIZE(nums); k++) {
        PyObject *c = PyLong_FromSsize_t(count[k]);
        if (c == NULL) {
            Py_CLEAR(counts);
            break;
        }
        PyList_SET_ITEM(counts, k, c);
    }
    if (counts != NULL) {
        result = PyTuple_Pack(2, nums, counts);
        Py_DECREF(counts);
    }
done:
    Py_XDECREF(nums);
    Py_XDECREF(where);
    PyMem_Free(count);
    return result;
}
PyMethodDef shdb_probe_methods[] = {
    {"encode_prefixes", encode_prefixes, METH_VARARGS,
     "encode_prefixes(fp, terms): codec.encode_prefixes in C."},
    {"bucket_keys", bucket_keys, METH_VARARGS,
     "bucket_keys(prefixes, index_filter, fresh_filter, trees=None): probes.bucket_keys in C."},
    {"lmdb_leaves", lmdb_leaves, METH_VARARGS,
     "lmdb_leaves(trees, table, keys): the leaf page each key's search reaches (tests)."},
    {"bucket_nums", bucket_nums, METH_VARARGS,
     "bucket_nums(prefixes, found, row_cap, trees=None): probes.bucket_nums in C."},
    {"mark_prefixes", mark_prefixes, METH_VARARGS,
     "mark_prefixes(bits, shift, chunk): filters.mark_prefixes in C."},
    {NULL, NULL, 0, NULL},
};
