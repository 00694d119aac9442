"""The store adapters: where bytes actually live (`memory`, `file`, `sqlite`, `postgres`, `s3`).

Owns each backend behind the `ArtifactStore` port, the SQL engine the SQLite and PostgreSQL
adapters share (`_sql`), and the connection plumbing conversation state shares with them
(`sqlite_file`, `pg`). The law: every adapter keeps the port's promises and passes the one
battery; this package imports nothing on its own, so a backend's dependency loads only when its
module is imported or its URL opened.
"""
