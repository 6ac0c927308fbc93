"""Log lines with their file and line number, read by Spark (any file system it reads): for the samples of
bad input, which quote a line as it was and say where it is."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

FILE_COLUMN = "_file"
LINE_COLUMN = "_line"
TEXT_COLUMN = "value"


def numbered_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """Every line of the files (blank ones too) as (_file, _line, value), _line counted from 1.

    A file may be read in several splits: a line's number is its position in its split (the rows of one
    split are consecutive in monotonically_increasing_id) plus the lines of the file's earlier splits.
    """
    text = spark.read.text(files).select(
        F.col("_metadata.file_path").alias(FILE_COLUMN), F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_id"), TEXT_COLUMN)
    earlier = Window.partitionBy(FILE_COLUMN).orderBy("_block").rowsBetween(Window.unboundedPreceding, -1)
    blocks = (text.groupBy(FILE_COLUMN, "_block")
              .agg(F.count(F.lit(1)).alias("_n"), F.min("_id").alias("_first"))
              .withColumn("_before", F.coalesce(F.sum("_n").over(earlier), F.lit(0))))
    return text.join(F.broadcast(blocks), [FILE_COLUMN, "_block"]).select(
        FILE_COLUMN, (F.col("_before") + F.col("_id") - F.col("_first") + 1).alias(LINE_COLUMN), TEXT_COLUMN)
