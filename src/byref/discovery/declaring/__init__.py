"""What the model is declared each turn: the scaffolding tools and the working set.

Owns `search_tools` / `activate_tool` (`scaffold`), the working set as a projection of the
transcript (`workingset`), the declarations and system lines of a request (`declare`), and the
glossary learned from search → activate (`usage`). The law: a search declares nothing; the
declared set is re-derived from the transcript every turn, name-sorted and byte-identical while it
is unchanged, with the one varying line last.
"""
