"""Text to 64-bit fingerprint: normalisation, segmentation, IDF, SimHash and probes.

Above the readers and below the byte layout; it never touches a store.
"""
