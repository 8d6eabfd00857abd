"""The sender's command line (``transcribe``, ``wait``): upload, wait through outages, print."""
