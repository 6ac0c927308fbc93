# The conversion-log audit (python -m spark_audit) on Apache Spark's own image. compose.yaml builds it.
# spark_audit needs Python 3.11 (datetime.UTC, enum.StrEnum); this Ubuntu 22.04 (jammy) based image has python3 3.10,
# so Ubuntu's python3.11 is added and PySpark is taken from the image's /opt/spark/python.
FROM apache/spark:3.5.6-java17-python3

USER root
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends python3.11; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /audit /opt/mqbridge; \
    chown spark /audit

# spark_audit imports only pyspark, the standard library and mappings.convlog_schema (pure Python)
COPY mappings /opt/mqbridge/mappings
COPY spark_audit /opt/mqbridge/spark_audit

ENV PYSPARK_PYTHON=python3.11 \
    PYTHONPATH=/opt/mqbridge:/opt/spark/python:/opt/spark/python/lib/py4j-0.10.9.7-src.zip \
    MQB_SPARK_CDS_DIR=/opt/mqbridge/cds

# The class archive every audit's JVM starts from (docs/audit.md, "Faster cold start": session start about
# 2.5x faster); made once here, for this image's Java and Spark. A build that cannot make it still works.
RUN mkdir -p /opt/mqbridge/cds && chown spark /opt/mqbridge/cds
USER spark
RUN python3.11 -m spark_audit.cds || echo "spark_audit.cds: no class archive made; audits start without one"
WORKDIR /audit
ENTRYPOINT ["python3.11", "-m", "spark_audit"]
CMD ["--help"]
