"""The catalog: which tools exist and what they are tagged with.

Owns the catalog (`catalog`), its ontology of concept ids and glossary (`ontology`), and loading
MCP `tools/list` answers into one (`mcp`). The law: a
catalog name is unique and is the name the model declares and calls; a tool is searched by its
own tags and text plus what its tags imply, and any change to the catalog bumps its version.
"""
