"""The seam to storage: running the PocketBase binary and talking to it."""
