"""What a FinderLedge hands to prompts, agents and LangChain: cited contexts, retrievers, a vector store,
scoped views, answers, language models, a self-query translator.
"""
