"""The offline engine: faster-whisper on this machine, batched, with optional speakers."""
