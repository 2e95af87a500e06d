"""The document-search design's ``app`` package: ``uvicorn app.main:app`` serves FinderLedge's API."""
