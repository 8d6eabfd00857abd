"""Running the service: the assembly of a worker pool (``assembly``), the start-up checks (``startup``),
``serve`` and ``worker`` with their signals and the PocketBase child (``supervise``), and the demo."""
