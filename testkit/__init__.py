"""What the tests and the benchmarks share: a throwaway PocketBase with the project's schema
(``pocketbase``), generated and committed speech (``audio``, ``media``), word error rate (``wer``)
and a local S3 server (``s3``). Not part of the installed package."""
