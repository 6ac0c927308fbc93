# mqbridge: the gateway (built-in MQTT broker + routes to IBM MQ and JMS) on python:3.11-slim.
#   docker build -t mqbridge .        (compose.yaml builds it for you)
#   docker run -p 1883:1883 -v $PWD/deploy:/etc/mqbridge:ro mqbridge
# The IBM MQ connector needs IBM's MQ C client library: the redistributable client is unpacked in
# /opt/mqm (build with --build-arg MQ_CLIENT=none to leave it out; mq routes then refuse to start
# and say what is missing, every other route works).
FROM python:3.11-slim

ARG MQ_CLIENT=9.4.0.5
ARG MQ_CLIENT_SHA256=5398c48756e80f1cbba86d17d75a55d18f9164bafa6b48eb7f501efc5243dfd9
ARG MQ_REDIST_BASE=https://public.dhe.ibm.com/ibmdl/export/pub/software/websphere/messaging/mqdev/redist

RUN set -eux; \
    if [ "$MQ_CLIENT" != "none" ]; then \
        apt-get update; \
        apt-get install -y --no-install-recommends ca-certificates curl; \
        tarball="$MQ_CLIENT-IBM-MQC-Redist-LinuxX64.tar.gz"; \
        curl --fail --location --retry 5 --silent --show-error -o "/tmp/$tarball" "$MQ_REDIST_BASE/$tarball"; \
        echo "$MQ_CLIENT_SHA256  /tmp/$tarball" | sha256sum --check -; \
        mkdir -p /opt/mqm; \
        tar -xzf "/tmp/$tarball" -C /opt/mqm; \
        rm "/tmp/$tarball"; \
        apt-get purge -y curl; \
        apt-get autoremove -y; \
        rm -rf /var/lib/apt/lists/*; \
    fi

# libmqm_r.so / libmqic_r.so for pymqi or ibmmq
ENV LD_LIBRARY_PATH=/opt/mqm/lib64 \
    MQ_FILE_PATH=/opt/mqm \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /opt/mqbridge/src
COPY pyproject.toml README.md ./
COPY bridge ./bridge
COPY mappings ./mappings
COPY spark_audit ./spark_audit
# extras: ibmmq (IBM's MQI package, prebuilt wheel; pymqi would need a compiler and the MQ headers),
# speed (uvloop) and parquet (pyarrow: Parquet sidecars of closed conversion-log files for the audit)
RUN pip install --no-cache-dir ".[ibmmq,speed,parquet]"

RUN useradd --system --uid 10001 --home-dir /var/lib/mqbridge mqbridge \
    && mkdir -p /etc/mqbridge /var/lib/mqbridge /var/log/mqbridge/convlog \
    && chown -R mqbridge /var/lib/mqbridge /var/log/mqbridge
COPY deploy/mqbridge.yaml deploy/rules.yaml /etc/mqbridge/

USER mqbridge
WORKDIR /var/lib/mqbridge
VOLUME ["/var/lib/mqbridge", "/var/log/mqbridge"]
EXPOSE 1883
ENTRYPOINT ["mqbridge"]
CMD ["serve", "-c", "/etc/mqbridge/mqbridge.yaml"]
