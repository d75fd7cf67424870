/* Text kernels in C: Terms(...).top(tokens, n), Fingerprinter.weighted_terms
 * before v2's cap: token -> term (strip, lower, stop words, \w), v2's term
 * filters, counts, count factor x IDF, the n heaviest by (weight, term). What
 * Python decides per distinct token (str.strip, str.lower, rare Unicode
 * categories) is asked of Python's own str methods or functions, once per
 * token, and remembered. The reference stays the pure-Python code
 * (tests/test_native.py compares them on arbitrary text).
 *
 * Compiled with -ffp-contract=off (setup.py): no fused multiply-add, so each
 * product and square root rounds as Python's floats do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* ------------------------------------------------------------------ */
/* Terms: token -> term, counts, weights, top-N                        */
/* ------------------------------------------------------------------ */

/* One term and its IDF; immutable once made (threads share it). */
typedef struct {
    PyObject_HEAD
    PyObject *term; /* NULL: the token makes no term */
    double idf;
} Entry;

static void
entry_dealloc(Entry *self)
{
    Py_XDECREF(self->term);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "simhash_hbase._native._kernels.Entry",
    .tp_basicsize = sizeof(Entry),
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static Entry *
entry_new(PyObject *term, double idf)
{
    Entry *e = PyObject_New(Entry, &EntryType);
    if (e != NULL) {
        Py_XINCREF(term);
        e->term = term;
        e->idf = idf;
    }
    return e;
}

typedef struct {
    PyObject_HEAD
    PyObject *stop;       /* frozenset of stop words */
    PyObject *has_letter; /* simhash.has_letter, for characters decided in Python */
    PyObject *idf;        /* dict term -> IDF, or None (then the sorted arrays) */
    Py_buffer keys;       /* sorted UCS4 records of `width` code points (SparseIdf) */
    Py_buffer values;     /* their float64 IDFs */
    Py_ssize_t width;
    double median;
    int v2;      /* version 2: v2_keeps, count ** 1.75 */
    int letter;  /* the "letter" term rule */
    Py_ssize_t max_entries;
    PyObject *tokens; /* token -> Entry */
    PyObject *terms;  /* term -> Entry: one Entry a term */
    Entry *dropped;
    Py_ssize_t active; /* calls of top under way (threads): the caches are cleared at 0 */
    Entry **single; /* the Entry of each one-character token of the BMP (borrowed) */
} Terms;

static void
terms_dealloc(Terms *self)
{
    Py_XDECREF(self->stop);
    Py_XDECREF(self->has_letter);
    Py_XDECREF(self->idf);
    if (self->keys.obj != NULL) {
        PyBuffer_Release(&self->keys);
    }
    if (self->values.obj != NULL) {
        PyBuffer_Release(&self->values);
    }
    Py_XDECREF(self->tokens);
    Py_XDECREF(self->terms);
    Py_XDECREF(self->dropped);
    PyMem_Free(self->single);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
terms_init(Terms *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"stop", "has_letter", "idf", "keys", "values", "width",
                            "median", "v2", "letter", "max_entries", NULL};
    PyObject *stop, *has_letter, *idf, *keys, *values;
    Py_ssize_t width, max_entries;
    double median;
    int v2, letter;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOOOndppn:Terms", names, &PyFrozenSet_Type,
                                     &stop, &has_letter, &idf, &keys, &values, &width, &median,
                                     &v2, &letter, &max_entries)) {
        return -1;
    }
    if (self->tokens != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Terms is initialised once");
        return -1;
    }
    if (idf != Py_None && !PyDict_Check(idf)) {
        PyErr_SetString(PyExc_TypeError, "idf must be a dict or None");
        return -1;
    }
    if (idf == Py_None) {
        if (width <= 0 || PyObject_GetBuffer(keys, &self->keys, PyBUF_SIMPLE) < 0) {
            PyErr_SetString(PyExc_ValueError, "keys must be a buffer of width > 0 records");
            return -1;
        }
        if (PyObject_GetBuffer(values, &self->values, PyBUF_SIMPLE) < 0) {
            return -1;
        }
        if (self->keys.len % (4 * width) != 0 ||
            self->values.len != (Py_ssize_t)(self->keys.len / (4 * width) * sizeof(double))) {
            PyErr_SetString(PyExc_ValueError, "keys and values do not match");
            return -1;
        }
    }
    Py_INCREF(stop);
    self->stop = stop;
    Py_INCREF(has_letter);
    self->has_letter = has_letter;
    Py_INCREF(idf);
    self->idf = idf;
    self->width = width;
    self->median = median;
    self->v2 = v2;
    self->letter = letter;
    self->max_entries = max_entries;
    self->tokens = PyDict_New();
    self->terms = PyDict_New();
    self->dropped = entry_new(NULL, 0.0);
    if (self->tokens == NULL || self->terms == NULL || self->dropped == NULL) {
        return -1;
    }
    self->single = PyMem_Calloc(0x10000, sizeof(Entry *));
    if (self->single == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* simhash._HAS_WORD_CHAR: re's \w, Py_UNICODE_ISALNUM or "_" (sre.c SRE_UNI_IS_WORD). */
static int
has_word_char(PyObject *s)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISALNUM(c) || c == '_') {
            return 1;
        }
    }
    return 0;
}

/* simhash.v2_keeps: not one ASCII character, not a number [0-9][0-9.,:/_-]*. */
static int
v2_keeps(PyObject *s)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n == 1 && PyUnicode_READ(kind, data, 0) < 128) {
        return 0;
    }
    if (n == 0) {
        return 1;
    }
    Py_UCS4 first = PyUnicode_READ(kind, data, 0);
    if (first < '0' || first > '9') {
        return 1;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!((c >= '0' && c <= '9') || c == '.' || c == ',' || c == ':' || c == '/' ||
              c == '_' || c == '-')) {
            return 1;
        }
    }
    return 0;
}

/* simhash.has_letter (a character of category L* or N*): 1, 0, or -1 on error.
 * Letters (Py_UNICODE_ISALPHA: Lu Ll Lt Lm Lo) and decimal digits (Nd) decide
 * here, as does an all-ASCII term; anything else asks the Python function. */
static int
has_letter(Terms *self, PyObject *s)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int ascii = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 128 ? ascii_alnum(c) : (Py_UNICODE_ISALPHA(c) || Py_UNICODE_ISDECIMAL(c))) {
            return 1;
        }
        ascii = ascii && c < 128;
    }
    if (ascii) {
        return 0;
    }
    PyObject *r = PyObject_CallOneArg(self->has_letter, s);
    if (r == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(r);
    Py_DECREF(r);
    return truth;
}

/* term vs a NUL-padded UCS4 record, as numpy compares them (code points). */
static int
compare_record(PyObject *term, const uint32_t *record, Py_ssize_t width)
{
    int kind = PyUnicode_KIND(term);
    const void *data = PyUnicode_DATA(term);
    Py_ssize_t n = PyUnicode_GET_LENGTH(term);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c != record[i]) {
            return c < record[i] ? -1 : 1;
        }
    }
    return n < width && record[n] != 0 ? -1 : 0;
}

/* The term's IDF: the table's value, or the median (SparseIdf.resolve, idf.get). */
static int
idf_of(Terms *self, PyObject *term, double *out)
{
    *out = self->median;
    if (self->idf != Py_None) {
        PyObject *v = PyDict_GetItemWithError(self->idf, term);
        if (v == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        *out = PyFloat_AsDouble(v);
        return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(term);
    if (n > self->width || PyUnicode_FindChar(term, 0, 0, n, 1) != -1) {
        return 0; /* longer than any entry, or with a NUL: not in the table */
    }
    const uint32_t *keys = self->keys.buf;
    Py_ssize_t lo = 0, hi = self->keys.len / (4 * self->width);
    while (lo < hi) { /* numpy.searchsorted, side "left" */
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (compare_record(term, keys + mid * self->width, self->width) > 0) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    if (lo < self->keys.len / (4 * self->width) &&
        compare_record(term, keys + lo * self->width, self->width) == 0) {
        *out = ((const double *)self->values.buf)[lo];
    }
    return 0;
}

/* The Entry of a term that is kept (v2's filters passed), made once per term. */
static Entry *
entry_of_term(Terms *self, PyObject *term)
{
    Entry *e = (Entry *)PyDict_GetItemWithError(self->terms, term);
    if (e != NULL || PyErr_Occurred()) {
        return e;
    }
    int keep = 1;
    if (self->v2) {
        keep = v2_keeps(term);
        if (keep && self->letter) {
            keep = has_letter(self, term);
            if (keep < 0) {
                return NULL;
            }
        }
    }
    double idf = 0.0;
    if (keep && idf_of(self, term, &idf) < 0) {
        return NULL;
    }
    e = keep ? entry_new(term, idf) : self->dropped;
    if (e == NULL) {
        return NULL;
    }
    if (!keep) {
        Py_INCREF(e);
    }
    /* another thread may have made it meanwhile (has_letter can run Python): one a term */
    Entry *held = (Entry *)PyDict_SetDefault(self->terms, term, (PyObject *)e);
    Py_DECREF(e);
    return held;
}

/* Only characters of jieba's Chinese range (U+4E00-U+9FD5), and some. */
static int
all_han(PyObject *s)
{
    if (PyUnicode_KIND(s) != PyUnicode_2BYTE_KIND || PyUnicode_GET_LENGTH(s) == 0) {
        return 0;
    }
    const Py_UCS2 *data = PyUnicode_2BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(s); i++) {
        if (data[i] < 0x4E00 || data[i] > 0x9FD5) {
            return 0;
        }
    }
    return 1;
}

/* simhash._term_of()[token], then the term's Entry (borrowed); NULL on error. */
static Entry *entry_of_token(Terms *self, PyObject *token);

/* entry_of_token, with one-character tokens (most of them) found without a hash. */
static Entry *
entry_of(Terms *self, PyObject *token)
{
    if (PyUnicode_GET_LENGTH(token) != 1 || PyUnicode_KIND(token) == PyUnicode_4BYTE_KIND) {
        return entry_of_token(self, token);
    }
    Py_UCS4 c = PyUnicode_READ_CHAR(token, 0);
    if (self->single[c] == NULL) {
        self->single[c] = entry_of_token(self, token);
    }
    return self->single[c];
}

static Entry *
entry_of_token(Terms *self, PyObject *token)
{
    Entry *e = (Entry *)PyDict_GetItemWithError(self->tokens, token);
    if (e != NULL || PyErr_Occurred()) {
        return e;
    }
    PyObject *term;
    if (all_han(token)) { /* no space, no case: str.strip and str.lower keep it */
        Py_INCREF(token);
        term = token;
    }
    else {
        PyObject *stripped = PyObject_CallMethod(token, "strip", NULL);
        term = stripped ? PyObject_CallMethod(stripped, "lower", NULL) : NULL;
        Py_XDECREF(stripped);
        if (term == NULL) {
            return NULL;
        }
    }
    int stop = PyUnicode_GET_LENGTH(term) == 0 ? 1 : PySet_Contains(self->stop, term);
    if (stop < 0) {
        Py_DECREF(term);
        return NULL;
    }
    e = !stop && has_word_char(term) ? entry_of_term(self, term) : self->dropped;
    Py_DECREF(term);
    if (e == NULL || PyDict_SetItem(self->tokens, token, (PyObject *)e) < 0) {
        return NULL;
    }
    return e;
}

typedef struct {
    Entry *entry;
    double weight;
} Weighted;

/* Heavier first; equal weights: the greater term first (keys are unique). */
static int
heavier(const Weighted *a, const Weighted *b)
{
    if (a->weight != b->weight) {
        return a->weight > b->weight;
    }
    return PyUnicode_Compare(a->entry->term, b->entry->term) > 0;
}

static int
weighted_order(const void *a, const void *b)
{
    return heavier(a, b) ? -1 : heavier(b, a) ? 1 : 0;
}

/* The count factor: v2's n ** 1.75 as n * sqrt(n * sqrt(n)) (simhash._v2_count). */
static double
factor(const Terms *self, Py_ssize_t count)
{
    double n = (double)count;
    return self->v2 ? n * sqrt(n * sqrt(n)) : n;
}

/* The n heaviest of the counted entries, heaviest first, into `out` (has room for n). */
static Py_ssize_t
heaviest(const Terms *self, Entry **seen, const Py_ssize_t *counts, Py_ssize_t k, Py_ssize_t n,
         Weighted *out)
{
    Py_ssize_t have = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        Weighted w = {seen[i], factor(self, counts[i]) * seen[i]->idf};
        if (!(0.0 < w.weight)) {
            continue; /* a term weighing 0 carries no signal (weighted_terms) */
        }
        if (n > 64) { /* large N: sort them all below */
            out[have++] = w;
            continue;
        }
        if (have == n && !heavier(&w, &out[n - 1])) {
            continue;
        }
        Py_ssize_t at = have < n ? have++ : n - 1;
        while (at > 0 && heavier(&w, &out[at - 1])) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = w;
    }
    if (n > 64) {
        qsort(out, (size_t)have, sizeof(*out), weighted_order);
        if (have > n) {
            have = n;
        }
    }
    return have;
}

/* The distinct terms of one call and their counts: local to the call, so threads
 * sharing a Terms never share counts. `slots` is an open-addressing table from an
 * Entry's address to its index + 1 (0: empty), at most half full. */
typedef struct {
    Entry **seen; /* held (a reference each) */
    Py_ssize_t *counts;
    Py_ssize_t k, room;
    Py_ssize_t *slots;
    size_t mask;
} Counts;

static size_t
slot_of(const Counts *c, const Entry *e)
{
    return (size_t)(((uintptr_t)e >> 4) * 0x9E3779B97F4A7C15ULL) & c->mask;
}

static int
counts_grow(Counts *c)
{
    Py_ssize_t room = c->room * 2 + 64;
    Entry **seen = PyMem_Realloc(c->seen, (size_t)room * sizeof(Entry *));
    if (seen != NULL) {
        c->seen = seen;
    }
    Py_ssize_t *counts = seen ? PyMem_Realloc(c->counts, (size_t)room * sizeof(Py_ssize_t)) : NULL;
    if (counts != NULL) {
        c->counts = counts;
    }
    size_t size = 1;
    while (size < (size_t)room * 2) {
        size <<= 1;
    }
    Py_ssize_t *slots = counts ? PyMem_Calloc(size, sizeof(Py_ssize_t)) : NULL;
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyMem_Free(c->slots);
    c->slots = slots;
    c->mask = size - 1;
    c->room = room;
    for (Py_ssize_t i = 0; i < c->k; i++) {
        size_t at = slot_of(c, c->seen[i]);
        while (c->slots[at]) {
            at = (at + 1) & c->mask;
        }
        c->slots[at] = i + 1;
    }
    return 0;
}

/* Counts one more of e. */
static int
counts_add(Counts *c, Entry *e)
{
    if (c->slots != NULL) {
        size_t at = slot_of(c, e);
        for (; c->slots[at]; at = (at + 1) & c->mask) {
            if (c->seen[c->slots[at] - 1] == e) {
                c->counts[c->slots[at] - 1]++;
                return 0;
            }
        }
    }
    if (c->k == c->room && counts_grow(c) < 0) {
        return -1;
    }
    size_t at = slot_of(c, e);
    while (c->slots[at]) {
        at = (at + 1) & c->mask;
    }
    c->slots[at] = c->k + 1;
    Py_INCREF(e);
    c->seen[c->k] = e;
    c->counts[c->k++] = 1;
    return 0;
}

static void
counts_free(Counts *c)
{
    for (Py_ssize_t i = 0; i < c->k; i++) {
        Py_DECREF(c->seen[i]);
    }
    PyMem_Free(c->seen);
    PyMem_Free(c->counts);
    PyMem_Free(c->slots);
}

/* Counts the kept terms of `tokens` (a sequence of str). */
static int
count_tokens(Terms *self, PyObject *tokens, Counts *c)
{
    PyObject *fast = PySequence_Fast(tokens, "tokens must be a sequence of str");
    if (fast == NULL) {
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < len; i++) {
        if (!PyUnicode_Check(items[i])) {
            PyErr_SetString(PyExc_TypeError, "a token is not a str");
            rc = -1;
            break;
        }
        Entry *e = entry_of(self, items[i]);
        if (e == NULL) {
            rc = -1;
        }
        else if (e->term != NULL) {
            rc = counts_add(c, e);
        }
    }
    Py_DECREF(fast);
    return rc;
}

static PyObject *
terms_top(Terms *self, PyObject *args)
{
    PyObject *tokens;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On:top", &tokens, &n)) {
        return NULL;
    }
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "n must be at least 1");
        return NULL;
    }
    /* bounded, like Memo; never while another thread's call holds entries of them */
    if (self->active == 0 && PyDict_GET_SIZE(self->tokens) >= self->max_entries) {
        PyDict_Clear(self->tokens);
        PyDict_Clear(self->terms);
        memset(self->single, 0, 0x10000 * sizeof(Entry *));
    }
    self->active++;
    Counts c = {0};
    Weighted *top = NULL;
    PyObject *result = NULL;
    if (count_tokens(self, tokens, &c) < 0) {
        goto done;
    }
    Py_ssize_t cap = n > 64 ? c.k : n;
    top = PyMem_Malloc((size_t)(cap > 0 ? cap : 1) * sizeof(Weighted));
    if (top == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t have = heaviest(self, c.seen, c.counts, c.k, n, top);
    result = PyList_New(have);
    for (Py_ssize_t i = 0; result != NULL && i < have; i++) {
        PyObject *pair = Py_BuildValue("(Od)", top[i].entry->term, top[i].weight);
        if (pair == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, pair);
    }
done:
    self->active--;
    counts_free(&c);
    PyMem_Free(top);
    return result;
}

static PyObject *
terms_size(Terms *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(PyDict_GET_SIZE(self->tokens));
}

static PyMethodDef terms_methods[] = {
    {"top", (PyCFunction)terms_top, METH_VARARGS,
     "top(tokens, n): the n heaviest (term, weight) pairs of the tokens, heaviest first."},
    {"size", (PyCFunction)terms_size, METH_NOARGS, "Tokens remembered."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TermsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "simhash_hbase._native._kernels.Terms",
    .tp_basicsize = sizeof(Terms),
    .tp_dealloc = (destructor)terms_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Token -> term, counts, TF-IDF weights and top-N of a fingerprint.",
    .tp_methods = terms_methods,
    .tp_init = (initproc)terms_init,
    .tp_new = PyType_GenericNew,
};


int
shdb_terms_ready(PyObject *module)
{
    if (PyType_Ready(&EntryType) < 0 || PyType_Ready(&TermsType) < 0) {
        return -1;
    }
    Py_INCREF(&TermsType);
    if (PyModule_AddObject(module, "Terms", (PyObject *)&TermsType) < 0) {
        Py_DECREF(&TermsType);
        return -1;
    }
    return 0;
}
