# shdb-serve: `shdb serve` on the project's image (docs/serve.md).
#
# Built by docker/build-serve on top of the image docker/build makes (so no other
# base image is needed): Python from the base's distribution, a virtualenv with
# the project and its serve, hbase and fast extras, from the wheels build-serve
# made (no package index is reached from here).  Run it with host
# networking; it binds $SHDB_SERVE_HOST:$SHDB_SERVE_PORT [127.0.0.1:8080] and
# serves $SHDB_INDEX.  Anything but loopback needs $SHDB_TOKEN (or a token file
# given with --token-file in the command).
ARG BASE=shdb-hbase:2.6.1
FROM ${BASE}

USER root
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/shdb/venv
# The dependencies first (a layer that changes only when they do), then the project.
COPY dist/ /tmp/dist/
RUN /opt/shdb/venv/bin/pip install --no-cache-dir --no-index --no-deps /tmp/dist/*.whl \
 && rm -rf /tmp/dist
COPY project/ /tmp/project/
RUN /opt/shdb/venv/bin/pip install --no-cache-dir --no-index --find-links /tmp/project \
      "simhash-hbase[serve,hbase,fast]" \
 && /opt/shdb/venv/bin/pip check \
 && rm -rf /tmp/project
COPY serve-entrypoint /opt/shdb/serve-entrypoint

ENV PATH=/opt/shdb/venv/bin:$PATH \
    SHDB_SERVE_HOST=127.0.0.1 \
    SHDB_SERVE_PORT=8080
USER hbase
HEALTHCHECK --interval=10s --timeout=10s --start-period=60s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ['SHDB_SERVE_PORT'], timeout=8)"]
# SIGTERM drains: in-flight requests finish, queued writes commit (docker stop -t 45).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/shdb/serve-entrypoint"]
