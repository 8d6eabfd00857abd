"""Speech recognition behind one interface (``base.Provider``)."""
