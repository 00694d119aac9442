"""A search page: what `search_tools` answers with.

Owns the searcher and its page of ranked rows (`search`), the excerpt lens that picks which
characters of each description a row shows (`excerpts`), and the decision to say no tool fits
(`abstain`). The law: a page is a menu, never a declaration; its excerpts share one page budget;
abstaining rests on the rankers' own evidence, never on a list of topics.
"""
