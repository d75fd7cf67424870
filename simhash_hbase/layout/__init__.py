"""The byte contract (docs/SPEC.md): the pigeonhole scheme, every byte of the row
keys and columns, and the batch pair search that shares the scheme's prefixes.

Stores depend on this layer; it depends on nothing above fingerprints.
"""
