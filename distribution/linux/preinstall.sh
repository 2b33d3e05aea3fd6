#!/bin/sh
# The service runs as its own system user, without a shell or a home.
set -e
getent group otelcol-openhands >/dev/null || groupadd --system otelcol-openhands
getent passwd otelcol-openhands >/dev/null ||
	useradd --system --gid otelcol-openhands --no-create-home \
		--home-dir /var/lib/otelcol-openhands --shell /usr/sbin/nologin \
		--comment "otelcol-openhands collector" otelcol-openhands
