"""transcriber: the Python sidecar of a self-hosted transcription service.

PocketBase owns the data, the rules, the panel and the atomic routes; this
package runs the pipeline (claim → step → fenced outcome) and the CLI.
"""

from importlib.metadata import PackageNotFoundError, version

from sidecar.media import heap

# One heap for every thread, set before any starts: a thread started earlier keeps an arena of its
# own, and the decoder's threads could then take one of those, whose 64 MB heaps hold none of a
# window's buffers (heap.one_arena; ten minutes of Russian: 3 million page faults against 0.4).
heap.one_arena()

# The version of a checkout run without being installed: no release to compare with another's.
RELEASE_UNKNOWN = "0.0.0+unknown"

try:
    __version__ = version("transcriber")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = RELEASE_UNKNOWN
