#!/bin/sh
# Stop the service on removal; its state in /var/lib/otelcol-openhands is
# left for a reinstall (delete it by hand to forget every session).
set -e
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	case "$1" in
	upgrade | 1) ;; # deb upgrade, rpm upgrade: postinstall restarts it
	*)
		systemctl stop otelcol-openhands.service || true
		systemctl disable otelcol-openhands.service || true
		;;
	esac
fi
