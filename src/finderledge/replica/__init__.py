"""How a process's indexes follow the ledger: open from checkpoints, apply the change log, checkpoint.

Modules: ``core`` (:class:`Replica`), ``policy`` (when to checkpoint), ``legs`` (one leg's checkpoint record, opening, moving damaged files
aside), ``changes``, ``catch_up``, ``overlay``, ``shared`` (indexes every process shares), ``checking``
(``finderledge check``), ``ledger_vectors`` (what ``check --repair`` embeds with).
"""
