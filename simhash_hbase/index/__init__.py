"""The client API: ``SimhashIndex`` over any store, and the manifest it persists."""
