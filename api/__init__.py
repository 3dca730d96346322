"""FastAPI app: the thin chat path and the REST surface. Routes parse, resolve the
tenant and call one memwell service function."""
