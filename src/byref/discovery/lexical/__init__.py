"""Lexical search: text → terms → filtered, field-boosted BM25 (BM25F), re-ranked by rarity.

Owns the analyzer (`text`), the search index (`index`), its filters (`filters`), the
coverage-then-rarity order (`ranking`), the numpy scoring of a large index (`arrays`) and the
related words searched beside a query's own (`related`, with the packaged synonyms.txt and
near_words.txt and their pre-stemmed copies). The law: one analyzer for documents and queries;
candidates are filtered first; the array path's pages are the dict path's exactly.
"""
