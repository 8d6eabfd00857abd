"""OpenAI-compatible speech-to-text servers (synchronous)."""
