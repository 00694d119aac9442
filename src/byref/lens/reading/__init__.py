"""What the lens reads from a run and works out from it, before any HTML is drawn.

Owns the `Run` and reading a run directory into one (`run`), the lens's only door to the
artifact store (`readonly`), the per-turn cost against inlining everything (`costs`), and the tool
calls with the refs they took and returned (`calls`). The law: nothing here writes a byte or
draws a page; a fact is read from the record (the ledger's counting, the parts' `derived`
entries), never guessed.
"""
