"""How the lens is served: routes, the `Host` check, a whole store's pages, the gateway's mount.

Owns the HTTP face and its routes (`web`), the defence against DNS rebinding (`hosts`), the pages
of a conversation-state store (`stored`), and the ASGI app the gateway mounts at `/lens`
(`gateway`). The law: the server is a reader: GET and HEAD only, for the names it was started
for, and a caller sees only its own scopes' runs and artifacts.
"""
