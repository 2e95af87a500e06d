"""``finderledge mcp DIR``: the Model Context Protocol server (``server``) and its light command line
(``command``: the CLI starts without the SDK).
"""
