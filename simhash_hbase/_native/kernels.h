/* What each source of the _kernels extension gives module.c: its functions (a
 * method table) and, for terms.c, its types. Built as one module by setup.py. */
#ifndef SHDB_KERNELS_H
#define SHDB_KERNELS_H

#include <Python.h>

/* [0-9a-zA-Z]: text.c's segmentation and terms.c's term filters */
static inline int
ascii_alnum(Py_UCS4 c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Text kernels: fingerprinting (simhash_hbase/fingerprint/) */
extern PyMethodDef shdb_text_methods[];  /* text.c: segmentation, NFKC, hashing */
int shdb_terms_ready(PyObject *module);  /* terms.c: adds the Terms type */

/* Page and cell kernels: the index's probes and batch lookups (layout/, store/lmdb/) */
extern PyMethodDef shdb_probe_methods[]; /* probes.c: prefixes, buckets, LMDB pages */
extern PyMethodDef shdb_match_methods[]; /* match.c: cells to prefixes, removals */

#endif
