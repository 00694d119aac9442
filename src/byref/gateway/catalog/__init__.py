"""What the gateway offers a client: one immutable build of the tools (`toolbox`, `build`), an
upstream tool as a byref `Tool` (`proxy`), MCP types to byref's at the edge (`convert`), tool
metadata and modes (`metadata`), images, links and structuredContent beside a result's text
(`content`), and list-change announcements (`listchanges`)."""
