"""The transcript as data: its model, joining pieces, speakers, languages."""
