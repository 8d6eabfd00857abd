"""The owner's tools on the host that holds the data directory: backups, one sender's data exported or
erased, and what older backups still hold of an erased sender."""
