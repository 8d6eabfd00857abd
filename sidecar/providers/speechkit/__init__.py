"""Yandex SpeechKit: asynchronous recognition of a file in Object Storage."""
