/* Page and cell kernels in C: match_cells(found, probes, order), store/lmdb's
 * probes._matched_py (the reference; tests/test_compact.py compares them on
 * arbitrary buckets): the cells of a batch's buckets matched to its prefixes
 * in one pass, with no array per cell.
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

PyMethodDef shdb_match_methods[] = {
    {"match_cells", match_cells, METH_VARARGS,
     "match_cells(found, probes, order): probes._matched_py, one pass over the cells."},
    {NULL, NULL, 0, NULL},
};
