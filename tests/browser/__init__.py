"""The owner's admin panel (PocketBase's /_/) driven in a real headless Chromium."""
