"""Audio as data: decoding and probing, PCM, speech regions, the piece plan."""
