"""The run lens: a read-only web page over a run's transcript, trace and artifacts.

Owns what `byref lens PATH` serves (and the gateway mounts at `/lens`): per-turn model-visible
cost against inlining everything, each tool call with the refs it took and returned and where
each came from and went, artifacts rendered by kind with their lineage, search → activate
events, refusals and coverage facts. Not to be confused with `byref.discovery.page.excerpts`, the
excerpt lens that picks which characters of a tool description a search result shows.

The law: read-only by construction. The store is reached only through `ReadOnlyStore`, which has
`head` and `get` and nothing else, for the scopes it was given; the run directory is read, never
opened for writing; the server answers GET and HEAD only; and the page runs no script.
"""

from byref.lens.reading.readonly import ReadOnlyStore
from byref.lens.reading.run import Run, RunDirectoryError, load_run
from byref.lens.serving.web import Lens, Response, make_server, url_of

__all__ = ["Lens", "ReadOnlyStore", "Response", "Run", "RunDirectoryError", "load_run",
           "make_server", "url_of"]
