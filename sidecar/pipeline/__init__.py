"""The pipeline: the stage table, the runner (claim → guards → step → fenced outcome) and the pool."""
