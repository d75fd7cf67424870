/* The _kernels extension: the C fast paths of simhash_hbase, one module built
 * from the sources of this folder (setup.py; loaded by __init__.py):
 *
 * - text kernels (fingerprint/): text.c (segmentation corrections, NFKC's
 *   full-width forms, marked lines, term hashing) and terms.c (token -> term,
 *   counts, weights, top-N);
 * - page and cell kernels (layout/, store/lmdb/): probes.c (one query's
 *   prefixes, bucket keys and numbers, prefix filters, LMDB page prefetch) and
 *   match.c (a batch's cells matched to its prefixes; a removal's cells taken
 *   out of their buckets).
 *
 * SOURCE_SHA256 is the digest of all of them (setup.py): a build from other
 * sources is told apart and not used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "kernels.h"

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_kernels", "The per-token work of a fingerprint, and batch lookups' per-cell work, in C.", -1,
    NULL,
};

#ifndef SHDB_SOURCE_SHA256
#define SHDB_SOURCE_SHA256 "" /* built without setup.py: its source is unknown */
#endif

PyMODINIT_FUNC
PyInit__kernels(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddFunctions(m, shdb_text_methods) < 0
        || PyModule_AddFunctions(m, shdb_probe_methods) < 0
        || PyModule_AddFunctions(m, shdb_match_methods) < 0 || shdb_terms_ready(m) < 0
        || PyModule_AddStringConstant(m, "SOURCE_SHA256", SHDB_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
