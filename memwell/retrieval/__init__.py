"""Long-term retrieval: one entry point, `service.retrieve`; the SQL, ANN and access behind it."""
