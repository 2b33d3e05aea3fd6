#!/bin/sh
# Enable the service and (re)start it. On an upgrade the state in
# /var/lib/otelcol-openhands is kept: the new release resumes from it.
set -e
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	systemctl enable otelcol-openhands.service
	if systemctl is-active --quiet otelcol-openhands.service; then
		systemctl restart otelcol-openhands.service
	else
		systemctl start otelcol-openhands.service
	fi
fi
