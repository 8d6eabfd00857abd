"""The literary text: the transcript edited to be read (``edition``: rule-based, offline)."""
