"""PySpark audit of the mqbridge conversion log, in layers; a module imports only from its own layer or
those listed before it (tests/test_spark_audit_layers.py):

- session: options, cds (the JVM's class archive), session, frames (small frames from Python values),
  fs (files of hdfs://, s3a://, file:// paths through Hadoop's FileSystem API), table_files (the findings'
  Parquet tables written from their rows)
- ingest: schema, sources (which bytes of the log files are read), lines (numbered lines, for samples),
  sidecars (the gateway's Parquet copies of closed files, used when they match), parquet_log (the Parquet
  log's partitions and the sidecars it reads in place), checked_read (files of valid records only, read by
  the gateway's checked reader), read_ahead (a one-shot ingest's work done while the JVM starts), ingest
  (JSON Lines -> Parquet log), carry (an incremental run's tail),
  increments (the incremental ingest's batches)
- rollups: rollup (stored per-file groups of the window aggregate)
- audit: scope, keys (per-key findings), aggregates (the window job), findings, audit (a full audit),
  incremental (an incremental audit)
- report: charts, report; on top the command line: beside (rollups built beside the `--every` runs), run,
  __main__, cds.__main__
"""
