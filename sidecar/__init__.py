"""transcriber: the Python sidecar of a self-hosted transcription service.

PocketBase owns the data, the rules, the panel and the atomic routes; this
package runs the pipeline (claim → step → fenced outcome) and the CLI.
"""

__version__ = "0.1.0"
