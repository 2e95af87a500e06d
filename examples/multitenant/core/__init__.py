"""MochiRAG's core on FinderLedge: settings and LLM (managers), strategies (retriever_manager), answers (rag_chain)."""
