"""The seam between the pipeline and where records live.

``Storage`` (protocol.py) is everything the pipeline asks of storage: the
claim, the fenced transitions, the fenced writes of a step's results, the
reads, the record counts for metrics and the stream of changes that wakes
idle workers. Two implementations satisfy it and are held to one contract
test module: ``sidecar.pocketbase.client.PocketBaseClient`` (the real one,
over HTTP) and ``memory.InMemoryStorage`` (a twin for fast unit tests).

A step never sees ``Storage``: it gets a ``ClaimSession`` (session.py), which
carries its claim's token and can write only the claimed record's results.
"""
