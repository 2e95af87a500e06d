"""The search stage: the legs as the finder sees them, the :class:`Finder`, fusion (adaptive, calibrated),
absolute relevance, MMR, reranking, and the read path that ties them (``search``).
"""
