"""The HTML the lens draws: its building blocks and each kind of page.

Owns escaping, the page frame, cards and the per-turn chart (`markup`), a JSON array as a paged
table (`paged`), the run's front page (`overview`), one artifact's page by kind (`artifacts`),
and a recorded result's page (`results`). The law: every value from a run passes through `esc`,
the page runs no script, and an empty or unreadable section says so instead of vanishing.
"""
