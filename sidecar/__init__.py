"""transcriber: the Python sidecar of a self-hosted transcription service.

PocketBase owns the data, the rules, the panel and the atomic routes; this
package runs the pipeline (claim → step → fenced outcome) and the CLI.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("transcriber")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0.0.0+unknown"
