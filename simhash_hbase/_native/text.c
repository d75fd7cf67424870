/* The per-token work of a fingerprint in C (simhash_hbase/fingerprint/native.py),
 * and the per-cell work of the compact store's batch lookups.
 *
 * Each the exact counterpart of pure-Python code that stays the reference
 * (tests/test_native.py compares them on arbitrary text; tests/test_compact.py
 * the matcher on arbitrary buckets):
 *
 * - fast_cut(native_cut, text): segment._fast, the corrections that make
 *   rjieba's tokens jieba's (cut around CJK outside U+4E00-U+9FD5, ASCII runs
 *   re-split as jieba's HMM splits them).
 * - Terms(...).top(tokens, n): Fingerprinter.weighted_terms before v2's cap:
 *   token -> term (strip, lower, stop words, \w), v2's term filters, counts,
 *   count factor x IDF, the n heaviest by (weight, term). What Python decides
 *   per distinct token (str.strip, str.lower, rare Unicode categories) is asked
 *   of Python's own str methods or functions, once per token, and remembered.
 * - encode_prefixes, bucket_keys, bucket_nums, mark_prefixes: one query's
 *   probes of the embedded store and its prefix filters (codec.encode_prefixes,
 *   compact.bucket_keys/bucket_nums/mark_prefixes; the
 *   references, compared in tests/test_native_probe.py), so that a query makes
 *   a few C calls instead of ~100 Python ones. bucket_keys also prefetches the
 *   pages LMDB's searches of the buckets will read, bucket_nums those of the
 *   names rows where there are two or more (compact.Trees: a walk of LMDB
 *   0.9's page layout that decides no answer; lmdb_leaves shows tests where
 *   it ends).
 * - match_cells(found, probes, order): compact._matched_py, the cells of a
 *   batch's buckets matched to its prefixes in one pass, with no array per cell.
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

static int
ascii_alnum(Py_UCS4 c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
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
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "simhash_hbase.fingerprint._native.Entry",
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

/* ------------------------------------------------------------------ */
/* One query's probes of the embedded store (store/compact.py)         */
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

#define SPREAD 0x9E3779B97F4A7C15ULL /* compact._SPREAD */

/* compact.PrefixFilter.slot: the shift must leave 3 to 40 bits (set by read_shift). */
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
/* Prefetching the pages of LMDB searches (compact.Trees)              */
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

/* A compact.Trees: the map, and the roots (index, fresh, names). */
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

/* A prefix's value: its 5 bytes, big-endian (compact.PrefixFilter.slot). */
static uint64_t
prefix_value(const unsigned char *prefix)
{
    uint64_t v = 0;
    for (int j = 0; j < PREFIX_BYTES; j++) {
        v = v << 8 | prefix[j];
    }
    return v;
}

/* compact.bucket_keys; given trees (compact.Trees), the pages of the searches
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

/* compact.mark_prefixes */
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

/* compact.bucket_nums */
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

static PyMethodDef terms_methods[] = {
    {"top", (PyCFunction)terms_top, METH_VARARGS,
     "top(tokens, n): the n heaviest (term, weight) pairs of the tokens, heaviest first."},
    {"size", (PyCFunction)terms_size, METH_NOARGS, "Tokens remembered."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TermsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "simhash_hbase.fingerprint._native.Terms",
    .tp_basicsize = sizeof(Terms),
    .tp_dealloc = (destructor)terms_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Token -> term, counts, TF-IDF weights and top-N of a fingerprint.",
    .tp_methods = terms_methods,
    .tp_init = (initproc)terms_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ */
/* Batch lookups of the compact store: compact._matched_py in C        */
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

/* match_cells(found, probes, order): compact._matched_py. ``found``: a list of
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

static PyMethodDef module_methods[] = {
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
    {"encode_prefixes", encode_prefixes, METH_VARARGS,
     "encode_prefixes(fp, terms): codec.encode_prefixes in C."},
    {"bucket_keys", bucket_keys, METH_VARARGS,
     "bucket_keys(prefixes, index_filter, fresh_filter, trees=None): compact.bucket_keys in C."},
    {"lmdb_leaves", lmdb_leaves, METH_VARARGS,
     "lmdb_leaves(trees, table, keys): the leaf page each key's search reaches (tests)."},
    {"bucket_nums", bucket_nums, METH_VARARGS,
     "bucket_nums(prefixes, found, row_cap, trees=None): compact.bucket_nums in C."},
    {"match_cells", match_cells, METH_VARARGS,
     "match_cells(found, probes, order): compact._matched_py, one pass over the cells."},
    {"mark_prefixes", mark_prefixes, METH_VARARGS,
     "mark_prefixes(bits, shift, chunk): compact.mark_prefixes in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native", "The per-token work of a fingerprint, and batch lookups' per-cell work, in C.", -1,
    module_methods,
};

#ifndef SHDB_SOURCE_SHA256
#define SHDB_SOURCE_SHA256 "" /* built without setup.py: its source is unknown */
#endif

PyMODINIT_FUNC
PyInit__native(void)
{
    if (PyType_Ready(&EntryType) < 0 || PyType_Ready(&TermsType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&TermsType);
    if (PyModule_AddObject(m, "Terms", (PyObject *)&TermsType) < 0) {
        Py_DECREF(&TermsType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SHDB_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
