"""A compiled model as a file, and back: the export format (artifact), writing one (exporting), reading
one as untrusted input (importing, import_checks), the large weights each held once (weight_pool), and
CACHE_DIR's entries (cache, with file_digest remembering a model file's hash). The compile side of the
runtime: nothing here runs an inference."""
