"""PySpark audit of the mqbridge conversion log."""
