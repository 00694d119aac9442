"""Hybrid search: a packaged local sentence encoder fused with the lexical scores (optional).

Owns the fusion ranker (`embed`), the encoders (`encoder`, with the MiniLM WordPiece vocabulary
minilm-vocab.txt beside it), the on-disk cache of document vectors (`vectorcache`) and the
word-level evidence abstention reads (`wordnear`). The law: off by default, imported only when
asked for, and nothing is fetched at run time.
"""
