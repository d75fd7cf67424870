/* Text kernels in C (simhash_hbase/_native/__init__.py loads them): the
 * per-token work of a fingerprint beyond terms.c's. Each the exact counterpart
 * of pure-Python code that stays the reference (tests/test_native.py compares
 * them on arbitrary text):
 *
 * - fast_cut(native_cut, text): segment._fast, the corrections that make
 *   rjieba's tokens jieba's (cut around CJK outside U+4E00-U+9FD5, ASCII runs
 *   re-split as jieba's HMM splits them); find_square, block_around: its
 *   helpers.
 * - unwiden(text): simhash.normalise's full-width forms; marked_lines: the
 *   lines of a text holding a marked character (opencc_cache).
 * - sign_rows(terms, seed): mmh3.hash64 of each term, as +-1.0 per bit.
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
/* Segmentation corrections: segment._fast                             */
/* ------------------------------------------------------------------ */

/* segment._OUTSIDE_JIEBA: Chinese to jieba-rs but not to jieba. */
static int
outside_jieba(Py_UCS4 c)
{
    return (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x9FD6 && c <= 0x9FFF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x20000 && c <= 0x3FFFF);
}

/* [+#&._%\-] */
static int
ascii_sign(Py_UCS4 c)
{
    return c == '+' || c == '#' || c == '&' || c == '.' || c == '_' || c == '%' || c == '-';
}

static int
ascii_piece_char(Py_UCS4 c)
{
    return ascii_alnum(c) || ascii_sign(c);
}

/* segment._ASCII_RUN(text) is not None: two adjacent [a-zA-Z0-9+#&._%\-]. */
static int
has_ascii_run(PyObject *text)
{
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int prev = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int cur = ascii_piece_char(PyUnicode_READ(kind, data, i));
        if (cur && prev) {
            return 1;
        }
        prev = cur;
    }
    return 0;
}

/* The end of _HMM_SKIP's match [a-zA-Z0-9]+(?:\.\d+)?%? at `at` (an alnum). */
static Py_ssize_t
hmm_match_end(const Py_UCS1 *s, Py_ssize_t n, Py_ssize_t at)
{
    Py_ssize_t i = at;
    while (i < n && ascii_alnum(s[i])) {
        i++;
    }
    if (i + 1 < n && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
        i += 2;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
        }
    }
    if (i < n && s[i] == '%') {
        i++;
    }
    return i;
}

/* segment._run_kind: 0 none, 1 a piece jieba's HMM stage gives alone, 2 another. */
static int
run_kind(PyObject *token)
{
    if (!PyUnicode_IS_ASCII(token)) {
        return 0;
    }
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(token);
    Py_ssize_t n = PyUnicode_GET_LENGTH(token);
    if (n == 0) {
        return 0;
    }
    int signs_only = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!ascii_piece_char(s[i])) {
            return 0;
        }
        if (ascii_alnum(s[i])) {
            signs_only = 0;
        }
    }
    static const char *words[] = {"AT&T", "c#", "C#", "c++", "C++"}; /* _ASCII_WORDS */
    for (size_t w = 0; w < sizeof(words) / sizeof(*words); w++) {
        if ((size_t)n == strlen(words[w]) && memcmp(s, words[w], (size_t)n) == 0) {
            return 0;
        }
    }
    if (signs_only) {
        return 1; /* [+#&._%\-]+ */
    }
    return ascii_alnum(s[0]) && hmm_match_end(s, n, 0) == n ? 1 : 2;
}

/* Appends _HMM_SKIP.split(joined) without its empty pieces to `out`. */
static int
hmm_split(PyObject *joined, PyObject *out)
{
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(joined);
    Py_ssize_t n = PyUnicode_GET_LENGTH(joined);
    Py_ssize_t gap = 0, i = 0;
    while (i < n) {
        if (!ascii_alnum(s[i])) {
            i++;
            continue;
        }
        Py_ssize_t end = hmm_match_end(s, n, i);
        Py_ssize_t bounds[2][2] = {{gap, i}, {i, end}};
        for (int k = 0; k < 2; k++) {
            if (bounds[k][1] > bounds[k][0]) {
                PyObject *piece = PyUnicode_Substring(joined, bounds[k][0], bounds[k][1]);
                if (piece == NULL || PyList_Append(out, piece) < 0) {
                    Py_XDECREF(piece);
                    return -1;
                }
                Py_DECREF(piece);
            }
        }
        gap = i = end;
    }
    if (n > gap) {
        PyObject *piece = PyUnicode_Substring(joined, gap, n);
        if (piece == NULL || PyList_Append(out, piece) < 0) {
            Py_XDECREF(piece);
            return -1;
        }
        Py_DECREF(piece);
    }
    return 0;
}

/* Appends tokens[start:end], re-split, to out. */
static int
append_resplit(PyObject *tokens, Py_ssize_t start, Py_ssize_t end, PyObject *out)
{
    PyObject *run = PyList_GetSlice(tokens, start, end);
    if (run == NULL) {
        return -1;
    }
    PyObject *empty = PyUnicode_New(0, 0);
    PyObject *joined = empty ? PyUnicode_Join(empty, run) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(run);
    if (joined == NULL) {
        return -1;
    }
    int rc = hmm_split(joined, out);
    Py_DECREF(joined);
    return rc;
}

/* Appends tokens[start:end] to out as they are, in one step. */
static int
append_slice(PyObject *tokens, Py_ssize_t start, Py_ssize_t end, PyObject *out)
{
    if (end <= start) {
        return 0;
    }
    PyObject *slice = PyList_GetSlice(tokens, start, end);
    if (slice == NULL) {
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(out);
    int rc = PyList_SetSlice(out, n, n, slice);
    Py_DECREF(slice);
    return rc;
}

/* segment._resplit_ascii(tokens), appended to out: the tokens between the runs
 * it changes are copied a stretch at a time. */
static int
append_resplit_ascii(PyObject *tokens, PyObject *out)
{
    Py_ssize_t n = PyList_GET_SIZE(tokens);
    Py_ssize_t i = 0, kept = 0; /* tokens[kept:i] are still to be copied as they are */
    while (i < n) {
        int kind = run_kind(PyList_GET_ITEM(tokens, i));
        if (kind == 0) {
            i++;
            continue;
        }
        Py_ssize_t end = i + 1;
        while (end < n && run_kind(PyList_GET_ITEM(tokens, end)) != 0) {
            end++;
        }
        /* _CHANGED_RUN: a run of two pieces or more, or a lone kind 2 */
        if (end - i >= 2 || kind == 2) {
            if (append_slice(tokens, kept, i, out) < 0 || append_resplit(tokens, i, end, out) < 0) {
                return -1;
            }
            kept = end;
        }
        i = end;
    }
    return append_slice(tokens, kept, n, out);
}

/* segment._rjieba_span(native_cut, text[start:end]), appended to out. */
static int
append_span(PyObject *native_cut, PyObject *text, Py_ssize_t start, Py_ssize_t end,
            PyObject *out)
{
    PyObject *span = PyUnicode_Substring(text, start, end);
    if (span == NULL) {
        return -1;
    }
    PyObject *tokens = PyObject_CallFunctionObjArgs(native_cut, span, Py_True, NULL);
    if (tokens == NULL) {
        Py_DECREF(span);
        return -1;
    }
    int rc;
    if (!PyList_Check(tokens)) {
        PyErr_SetString(PyExc_TypeError, "the native cut must return a list");
        rc = -1;
    }
    else if (has_ascii_run(span)) {
        rc = append_resplit_ascii(tokens, out);
    }
    else {
        Py_ssize_t n = PyList_GET_SIZE(out);
        rc = PyList_SetSlice(out, n, n, tokens);
    }
    Py_DECREF(tokens);
    Py_DECREF(span);
    return rc;
}

/* segment._SQUARE.search(text, pos).span(): the leftmost repeat xx of 1 to 16
 * characters of U+4E00-U+9FD5, the longest x at that start (a greedy {1,16}).
 * One function per string kind (a direct array read: this scans every text). */
#define FIND_SQUARE(NAME, T)                                                        \
    static Py_ssize_t NAME(const T *s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t *end) \
    {                                                                               \
        Py_ssize_t bad = pos;                                                       \
        for (Py_ssize_t i = pos; i + 1 < n; i++) {                                  \
            if (bad < i) {                                                          \
                bad = i;                                                            \
            }                                                                       \
            while (bad < n && bad - i < 16 && s[bad] >= 0x4E00 && s[bad] <= 0x9FD5) { \
                bad++; /* bad: the end of the run of Han from i, at most 16 on */   \
            }                                                                       \
            for (Py_ssize_t p = bad - i; p >= 1; p--) {                             \
                if (i + 2 * p > n || s[i] != s[i + p]) {                            \
                    continue;                                                       \
                }                                                                   \
                Py_ssize_t k = 1;                                                   \
                while (k < p && s[i + k] == s[i + p + k]) {                         \
                    k++;                                                            \
                }                                                                   \
                if (k == p) {                                                       \
                    *end = i + 2 * p;                                               \
                    return i;                                                       \
                }                                                                   \
            }                                                                       \
        }                                                                           \
        return -1;                                                                  \
    }

FIND_SQUARE(find_square_1, Py_UCS1)
FIND_SQUARE(find_square_2, Py_UCS2)
FIND_SQUARE(find_square_4, Py_UCS4)

static PyObject *
find_square(PyObject *module, PyObject *args)
{
    PyObject *text;
    Py_ssize_t pos = 0, end = 0, start;
    if (!PyArg_ParseTuple(args, "U|n:find_square", &text, &pos)) {
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    pos = pos < 0 ? 0 : pos;
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        start = find_square_1(PyUnicode_1BYTE_DATA(text), n, pos, &end);
        break;
    case PyUnicode_2BYTE_KIND:
        start = find_square_2(PyUnicode_2BYTE_DATA(text), n, pos, &end);
        break;
    default:
        start = find_square_4(PyUnicode_4BYTE_DATA(text), n, pos, &end);
    }
    if (start < 0) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(nn)", start, end);
}

/* segment._BLOCK_CHARS: what jieba cuts as one block (its re_han_default). */
static int
block_char(Py_UCS4 c)
{
    return (c >= 0x4E00 && c <= 0x9FD5) || ascii_piece_char(c);
}

/* segment._block_around_py: the block of block characters holding text[start:end]. */
static PyObject *
block_around(PyObject *module, PyObject *args)
{
    PyObject *text;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "Unn:block_around", &text, &start, &end)) {
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (start < 0 || end < start || end > n) {
        PyErr_SetString(PyExc_IndexError, "block_around: start and end out of the text");
        return NULL;
    }
    while (start > 0 && block_char(PyUnicode_READ(kind, data, start - 1))) {
        start--;
    }
    while (end < n && block_char(PyUnicode_READ(kind, data, end))) {
        end++;
    }
    return Py_BuildValue("(nn)", start, end);
}

static PyObject *
fast_cut(PyObject *module, PyObject *args)
{
    PyObject *native_cut, *text;
    if (!PyArg_ParseTuple(args, "OU:fast_cut", &native_cut, &text)) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), last = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!outside_jieba(PyUnicode_READ(kind, data, i))) {
            continue;
        }
        PyObject *one = NULL;
        if (append_span(native_cut, text, last, i, out) < 0 ||
            (one = PyUnicode_Substring(text, i, i + 1)) == NULL || PyList_Append(out, one) < 0) {
            Py_XDECREF(one);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(one);
        last = i + 1;
    }
    if (append_span(native_cut, text, last, n, out) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* ------------------------------------------------------------------ */
/* NFKC's full-width forms: simhash.normalise                          */
/* ------------------------------------------------------------------ */

/* The full compatibility decomposition (NFKD) of the characters that keep most
 * Chinese text from being NFKC already, as ASCII: full-width forms U+FF01-U+FF5E
 * (<wide> ASCII), U+3000 (<wide> space), U+00A0 (<noBreak> space), U+2026 (...).
 * Replacing a character by its full compatibility decomposition leaves NFKD, and
 * so NFKC, of the text as it is; NFKC then has nothing left to do in most Chinese
 * text (tests/test_native.py checks each against unicodedata). NULL: keep c. */
static int
decomposed(Py_UCS4 c, Py_UCS4 to[3]) /* the length written to `to`; 0: keep c */
{
    if (c >= 0xFF01 && c <= 0xFF5E) {
        to[0] = c - 0xFEE0;
        return 1;
    }
    if (c == 0x3000 || c == 0xA0) {
        to[0] = ' ';
        return 1;
    }
    if (c == 0x2026) {
        to[0] = to[1] = to[2] = '.';
        return 3;
    }
    return 0;
}

static PyObject *
unwiden(PyObject *module, PyObject *args)
{
    PyObject *text;
    if (!PyArg_ParseTuple(args, "U:unwiden", &text)) {
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), length = 0;
    Py_UCS4 max = 0; /* the narrowest form: str equality compares the kind first */
    int changed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i), to[3];
        int more = decomposed(c, to);
        changed |= more;
        length += more ? more : 1;
        max = !more && c > max ? c : max;
    }
    if (!changed) {
        Py_INCREF(text);
        return text;
    }
    PyObject *out = PyUnicode_New(length, max > 127 ? max : 127);
    if (out == NULL) {
        return NULL;
    }
    int out_kind = PyUnicode_KIND(out);
    void *out_data = PyUnicode_DATA(out);
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i), to[3];
        int more = decomposed(c, to);
        if (!more) {
            PyUnicode_WRITE(out_kind, out_data, at++, c);
        }
        for (int k = 0; k < more; k++) {
            PyUnicode_WRITE(out_kind, out_data, at++, to[k]);
        }
    }
    return out;
}

static int
marked(const Py_buffer *bits, Py_UCS4 c)
{
    return (Py_ssize_t)(c >> 3) < bits->len && ((const unsigned char *)bits->buf)[c >> 3] >> (c & 7) & 1;
}

static int
append_index(PyObject *list, Py_ssize_t i)
{
    PyObject *at = PyLong_FromSsize_t(i);
    int rc = at == NULL ? -1 : PyList_Append(list, at);
    Py_XDECREF(at);
    return rc;
}

/* marked_lines(text, screen, certain): the indices of the lines ("\n") of text
 * holding a character whose bit is set in `screen` (a bitmap over code points), and
 * of those the lines holding one set in `certain` (opencc_cache.Screen). */
static PyObject *
marked_lines(PyObject *module, PyObject *args)
{
    PyObject *text;
    Py_buffer screen, certain;
    if (!PyArg_ParseTuple(args, "Uy*y*:marked_lines", &text, &screen, &certain)) {
        return NULL;
    }
    PyObject *maybe = PyList_New(0), *sure = PyList_New(0), *out = NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), line = 0;
    int ok = maybe != NULL && sure != NULL;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '\n') {
            line++;
            continue;
        }
        if (!marked(&screen, c)) {
            continue;
        }
        ok = append_index(maybe, line) == 0;
        int found = 0; /* the rest of this line: a certain character? */
        for (; i < n && (c = PyUnicode_READ(kind, data, i)) != '\n'; i++) {
            if (!found && marked(&certain, c)) {
                found = 1;
                ok = ok && append_index(sure, line) == 0;
            }
        }
        i--; /* the newline, if any, is counted by the outer loop */
    }
    if (ok) {
        out = PyTuple_Pack(2, maybe, sure);
    }
    Py_XDECREF(maybe);
    Py_XDECREF(sure);
    PyBuffer_Release(&screen);
    PyBuffer_Release(&certain);
    return out;
}

/* ------------------------------------------------------------------ */
/* Hashing: mmh3.hash64(term, seed, signed=False)[0], as signs         */
/* ------------------------------------------------------------------ */

static uint64_t
rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static uint64_t
fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static uint64_t
block64(const unsigned char *p) /* little-endian, as MurmurHash3 on x86 reads it */
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* MurmurHash3_x64_128's first 64 bits (what mmh3.hash64(...)[0] returns, unsigned). */
static uint64_t
murmur3_x64_128_low(const unsigned char *data, Py_ssize_t len, uint32_t seed)
{
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = seed, h2 = seed, k1, k2;
    Py_ssize_t nblocks = len / 16;
    for (Py_ssize_t i = 0; i < nblocks; i++) {
        k1 = block64(data + 16 * i);
        k2 = block64(data + 16 * i + 8);
        k1 *= c1;
        k1 = rotl64(k1, 31);
        k1 *= c2;
        h1 ^= k1;
        h1 = rotl64(h1, 27);
        h1 += h2;
        h1 = h1 * 5 + 0x52dce729;
        k2 *= c2;
        k2 = rotl64(k2, 33);
        k2 *= c1;
        h2 ^= k2;
        h2 = rotl64(h2, 31);
        h2 += h1;
        h2 = h2 * 5 + 0x38495ab5;
    }
    const unsigned char *tail = data + 16 * nblocks;
    Py_ssize_t rest = len & 15;
    k1 = k2 = 0;
    for (Py_ssize_t i = rest - 1; i >= 8; i--) {
        k2 ^= (uint64_t)tail[i] << (8 * (i - 8));
    }
    if (rest > 8) {
        k2 *= c2;
        k2 = rotl64(k2, 33);
        k2 *= c1;
        h2 ^= k2;
    }
    for (Py_ssize_t i = (rest < 8 ? rest : 8) - 1; i >= 0; i--) {
        k1 ^= (uint64_t)tail[i] << (8 * i);
    }
    if (rest > 0) {
        k1 *= c1;
        k1 = rotl64(k1, 31);
        k1 *= c2;
        h1 ^= k1;
    }
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    return h1;
}

/* sign_rows(terms, seed): for each term, its hash's 64 bits, most significant first,
 * as +1.0 (set) or -1.0: the rows simhash's bit sums multiply by the weights. */
static PyObject *
sign_rows(PyObject *module, PyObject *args)
{
    PyObject *terms;
    unsigned long seed;
    if (!PyArg_ParseTuple(args, "O!k:sign_rows", &PyList_Type, &terms, &seed)) {
        return NULL;
    }
    if (seed > 0xFFFFFFFFUL) {
        PyErr_SetString(PyExc_OverflowError, "the seed is a 32-bit unsigned integer");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(terms);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 64 * (Py_ssize_t)sizeof(double));
    if (out == NULL) {
        return NULL;
    }
    double *rows = (double *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *term = PyList_GET_ITEM(terms, i);
        Py_ssize_t len;
        const char *utf8 = PyUnicode_Check(term) ? PyUnicode_AsUTF8AndSize(term, &len) : NULL;
        if (utf8 == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "a term is not a str");
            }
            Py_DECREF(out);
            return NULL;
        }
        uint64_t h = murmur3_x64_128_low((const unsigned char *)utf8, len, (uint32_t)seed);
        for (int j = 0; j < 64; j++) {
            rows[64 * i + j] = (h >> (63 - j)) & 1 ? 1.0 : -1.0;
        }
    }
    return out;
}

PyMethodDef shdb_text_methods[] = {
    {"sign_rows", sign_rows, METH_VARARGS,
     "sign_rows(terms, seed): +-1.0 per bit of mmh3.hash64(term, seed)[0], MSB first."},
    {"marked_lines", marked_lines, METH_VARARGS,
     "marked_lines(text, screen, certain): the lines holding a marked character, of each."},
    {"unwiden", unwiden, METH_VARARGS,
     "unwiden(text): full-width ASCII, U+3000, U+00A0 and U+2026 as their NFKD (same NFKC)."},
    {"find_square", find_square, METH_VARARGS,
     "find_square(text, pos=0): segment._SQUARE.search(text, pos).span(), or None."},
    {"block_around", block_around, METH_VARARGS,
     "block_around(text, start, end): segment._block_around_py in C."},
    {"fast_cut", fast_cut, METH_VARARGS,
     "fast_cut(native_cut, text): segment._fast, the corrections of rjieba's tokens."},
    {NULL, NULL, 0, NULL},
};

