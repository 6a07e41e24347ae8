"""Model distribution: the catalog, Hub downloads, the local store, the offline pair, remote headers, conversion."""
