"""The one door to a persist directory's files, and what it owns: atomic and durable writes, segments,
checked reading of damaged or crafted files, seals for third-party files, locks, the PostgreSQL connection.

Modules: ``files`` (the door: inside the root, no link followed, atomic replace, a full disk told from damage),
``durable``, ``segments``, ``integrity``, ``seals``, ``locking``, ``postgres``, ``paths``.
"""
