/* Page and cell kernels in C, each with a pure-Python reference that
 * tests/test_compact.py compares it with on arbitrary buckets:
 *
 * - match_cells(found, probes, order), store/lmdb's probes._matched_py: the
 *   cells of a batch's buckets matched to its prefixes in one pass, with no
 *   array per cell;
 * - remove_cells(found, keys, packed), store/lmdb's buckets._edited_py: a
 *   removal's cells taken out of the buckets that hold them, with no Python
 *   work per bucket or per cell (the Python loop was most of a bulk removal).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* ------------------------------------------------------------------ */
/* Batch lookups of the compact store: probes._matched_py in C         */
/* ------------------------------------------------------------------ */

typedef struct {
    char *data;
    Py_ssize_t used, size;
} Grow;

static int
grow_put(Grow *g, const void *item, Py_ssize_t n)
{
    if (g->used + n > g->size) {
        Py_ssize_t size = g->size ? g->size * 2 : 4096;
        while (size < g->used + n) {
            size *= 2;
        }
        char *data = PyMem_Realloc(g->data, size);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        g->data = data;
        g->size = size;
    }
    memcpy(g->data + g->used, item, n);
    g->used += n;
    return 0;
}

/* The first position of probes[lo:hi] holding a value >= key. */
static Py_ssize_t
lower_bound(const uint64_t *probes, Py_ssize_t lo, Py_ssize_t hi, uint64_t key)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (probes[mid] < key) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* One bucket's cells (6 bytes: lead, big-endian number) against its probes
 * probes[a:b] (ascending): each (cell, equal probe) pair, in cell order. */
static int
match_bucket(const unsigned char *cells, Py_ssize_t n, const uint64_t *probes, Py_ssize_t a,
             Py_ssize_t b, uint64_t base, const int64_t *order, Grow *which, Grow *nums)
{
    for (Py_ssize_t at = 0; at < n; at += 6) {
        uint64_t key = base | (uint64_t)cells[at] << 8 | cells[at + 1];
        Py_ssize_t i = b - a <= 8 ? a : lower_bound(probes, a, b, key);
        for (; i < b && probes[i] <= key; i++) {
            if (probes[i] != key) {
                continue;
            }
            const unsigned char *c = cells + at + 2;
            uint32_t num = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
            if (grow_put(which, &order[i], sizeof(int64_t)) < 0 ||
                grow_put(nums, &num, sizeof(num)) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* match_cells(found, probes, order): probes._matched_py. ``found``: a list of
 * (3-byte bucket key, its cells); ``probes``: bucket << 16 | lead, ascending
 * (uint64); ``order``: the prefix position of each probe (int64). Each cell is
 * compared only with the probes of its own bucket, found by binary search: one
 * pass over the cells, with no array of them. (positions, numbers) as native
 * int64 and uint32 bytes. */
static PyObject *
match_cells(PyObject *module, PyObject *args)
{
    PyObject *found, *result = NULL;
    Py_buffer pb, ob;
    if (!PyArg_ParseTuple(args, "O!y*y*:match_cells", &PyList_Type, &found, &pb, &ob)) {
        return NULL;
    }
    Grow which = {NULL, 0, 0}, nums = {NULL, 0, 0};
    Py_ssize_t count = pb.len / (Py_ssize_t)sizeof(uint64_t);
    if (pb.len % sizeof(uint64_t) || ob.len != count * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "match_cells: probes and order must be of one length");
        goto done;
    }
    const uint64_t *probes = pb.buf;
    const int64_t *order = ob.buf;
    for (Py_ssize_t at = 0; at < PyList_GET_SIZE(found); at++) {
        PyObject *item = PyList_GET_ITEM(found, at);
        PyObject *key = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 ? PyTuple_GET_ITEM(item, 0)
                                                                             : NULL;
        PyObject *value = key ? PyTuple_GET_ITEM(item, 1) : NULL;
        if (!key || !PyBytes_Check(key) || PyBytes_GET_SIZE(key) != 3 || !PyBytes_Check(value) ||
            PyBytes_GET_SIZE(value) % 6) {
            PyErr_SetString(PyExc_ValueError,
                            "match_cells: a bucket key is 3 bytes, its cells 6 bytes each");
            goto done;
        }
        const unsigned char *k = (const unsigned char *)PyBytes_AS_STRING(key);
        uint64_t base = ((uint64_t)k[0] << 16 | (uint64_t)k[1] << 8 | k[2]) << 16;
        Py_ssize_t a = lower_bound(probes, 0, count, base);
        Py_ssize_t b = lower_bound(probes, a, count, base + 0x10000);
        if (a < b &&
            match_bucket((const unsigned char *)PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value),
                         probes, a, b, base, order, &which, &nums) < 0) {
            goto done;
        }
    }
    result = Py_BuildValue("(y#y#)", which.data ? which.data : "", which.used,
                           nums.data ? nums.data : "", nums.used);
done:
    PyMem_Free(which.data);
    PyMem_Free(nums.data);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&ob);
    return result;
}

/* ------------------------------------------------------------------ */
/* Bulk removal of the compact store: buckets._edited_py in C          */
/* ------------------------------------------------------------------ */

static uint64_t
cell_value(const unsigned char *c)
{
    return (uint64_t)c[0] << 40 | (uint64_t)c[1] << 32 | (uint64_t)c[2] << 24 |
           (uint64_t)c[3] << 16 | (uint64_t)c[4] << 8 | c[5];
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether ``v`` is one of want[0:w] (ascending where w > 8). */
static int
wanted(const uint64_t *want, Py_ssize_t w, uint64_t v)
{
    if (w <= 8) {
        for (Py_ssize_t i = 0; i < w; i++) {
            if (want[i] == v) {
                return 1;
            }
        }
        return 0;
    }
    Py_ssize_t lo = 0, hi = w;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (want[mid] < v) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < w && want[lo] == v;
}

static int
bucket_item(PyObject *item, PyObject **key, PyObject **value)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        return -1;
    }
    *key = PyTuple_GET_ITEM(item, 0);
    *value = PyTuple_GET_ITEM(item, 1);
    return PyBytes_Check(*key) && PyBytes_GET_SIZE(*key) == 3 && PyBytes_Check(*value) &&
                   PyBytes_GET_SIZE(*value) % 6 == 0
               ? 0
               : -1;
}

/* remove_cells(found, keys, packed): buckets._edited_py. ``keys`` (distinct
 * 3-byte bucket keys) and ``packed`` (the cells to take out of each, 6 bytes
 * apiece) are what a multi-get of ``keys`` answered with ``found`` (the pairs
 * (key, cells) of those held, in the order of ``keys``). Every copy of a cell
 * asked for goes. (changed, emptied, removed, marked): the pairs (key, cells
 * kept) of the buckets that lost cells and keep some, the keys of those left
 * empty, the cells removed, and the pairs of ``found`` whose buckets hold a
 * spilled lead's mark (a number of 0xffffffff). */
static PyObject *
remove_cells(PyObject *module, PyObject *args)
{
    PyObject *found, *keys, *packed, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!O!:remove_cells", &PyList_Type, &found, &PyList_Type, &keys,
                          &PyList_Type, &packed)) {
        return NULL;
    }
    Py_ssize_t nkeys = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(packed) != nkeys) {
        PyErr_SetString(PyExc_ValueError, "remove_cells: one packed value per key");
        return NULL;
    }
    PyObject *changed = PyList_New(0), *emptied = PyList_New(0), *marked = PyList_New(0);
    Grow kept = {NULL, 0, 0}, want = {NULL, 0, 0};
    Py_ssize_t removed = 0, k = 0;
    if (changed == NULL || emptied == NULL || marked == NULL) {
        goto done;
    }
    for (Py_ssize_t at = 0; at < PyList_GET_SIZE(found); at++) {
        PyObject *item = PyList_GET_ITEM(found, at), *key, *value;
        if (bucket_item(item, &key, &value) < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "remove_cells: a bucket key is 3 bytes, its cells 6 bytes each");
            goto done;
        }
        const char *kb = PyBytes_AS_STRING(key);
        while (k < nkeys) {
            PyObject *asked = PyList_GET_ITEM(keys, k);
            if (PyBytes_Check(asked) && PyBytes_GET_SIZE(asked) == 3 &&
                memcmp(PyBytes_AS_STRING(asked), kb, 3) == 0) {
                break;
            }
            k++;
        }
        PyObject *cells = k < nkeys ? PyList_GET_ITEM(packed, k) : NULL;
        if (cells == NULL || !PyBytes_Check(cells) || PyBytes_GET_SIZE(cells) % 6) {
            PyErr_SetString(PyExc_ValueError,
                            "remove_cells: found holds a key not asked (in order), or its "
                            "cells are not 6 bytes each");
            goto done;
        }
        k++;
        const unsigned char *c = (const unsigned char *)PyBytes_AS_STRING(cells);
        Py_ssize_t w = PyBytes_GET_SIZE(cells) / 6;
        want.used = 0;
        for (Py_ssize_t i = 0; i < w; i++) {
            uint64_t v = cell_value(c + 6 * i);
            if (grow_put(&want, &v, sizeof(v)) < 0) {
                goto done;
            }
        }
        uint64_t *wv = (uint64_t *)want.data;
        if (w > 8) {
            qsort(wv, w, sizeof(uint64_t), cmp_u64);
        }
        const unsigned char *old = (const unsigned char *)PyBytes_AS_STRING(value);
        Py_ssize_t n = PyBytes_GET_SIZE(value), gone = 0;
        int mark = 0;
        kept.used = 0;
        for (Py_ssize_t i = 0; i < n; i += 6) {
            const unsigned char *cell = old + i;
            mark |= cell[2] == 0xff && cell[3] == 0xff && cell[4] == 0xff && cell[5] == 0xff;
            if (w && wanted(wv, w, cell_value(cell))) {
                gone++;
            } else if (grow_put(&kept, cell, 6) < 0) {
                goto done;
            }
        }
        if (mark && PyList_Append(marked, item) < 0) {
            goto done;
        }
        if (!gone) {
            continue;
        }
        removed += gone;
        if (kept.used == 0) {
            if (PyList_Append(emptied, key) < 0) {
                goto done;
            }
            continue;
        }
        PyObject *pair = Py_BuildValue("(Oy#)", key, kept.data, kept.used);
        if (pair == NULL || PyList_Append(changed, pair) < 0) {
            Py_XDECREF(pair);
            goto done;
        }
        Py_DECREF(pair);
    }
    result = Py_BuildValue("(OOnO)", changed, emptied, removed, marked);
done:
    Py_XDECREF(changed);
    Py_XDECREF(emptied);
    Py_XDECREF(marked);
    PyMem_Free(kept.data);
    PyMem_Free(want.data);
    return result;
}

PyMethodDef shdb_match_methods[] = {
    {"match_cells", match_cells, METH_VARARGS,
     "match_cells(found, probes, order): probes._matched_py, one pass over the cells."},
    {"remove_cells", remove_cells, METH_VARARGS,
     "remove_cells(found, keys, packed): buckets._edited_py, a removal's bucket edits."},
    {NULL, NULL, 0, NULL},
};
