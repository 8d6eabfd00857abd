"""transcriber: the Python sidecar of a self-hosted transcription service.

PocketBase owns the data, the rules, the panel and the atomic routes; this
package runs the pipeline (claim → step → fenced outcome) and the CLI.
"""

from importlib.metadata import PackageNotFoundError, version

# The version of a checkout run without being installed: no release to compare with another's.
RELEASE_UNKNOWN = "0.0.0+unknown"

try:
    __version__ = version("transcriber")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = RELEASE_UNKNOWN
