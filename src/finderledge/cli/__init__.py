"""The ``finderledge`` command line: ``commands`` (every command and ``main``, the console script), ``logs``
(where log records go), ``search_options`` (options that reach the search API, shared with ``serve`` and ``mcp``).

Nothing is imported here, so the server's and the MCP command's use of ``search_options`` never imports every
command (and no import cycle runs through this package)."""
