// Package crashtest proves, with the built distribution, that a collector
// killed with SIGKILL at random points loses nothing and collides nowhere.
// It runs ./bin/otelcol-openhands (make build; make test builds it first)
// as a child process with file_storage on the openhands receiver and on
// the aeprelay and aepfile exporters' sending queues, between a stub agent
// server and a test relay that live in the test process, and kills,
// restarts and breaks them in turn; the aepfile exporter's session logs
// (fsync every_batch) must end up holding every event the relay got, once.
// TestOTLPInbound runs the same binary as the aepinbound processor's
// end-to-end test: Codex- and VS Code-shaped OTLP exports over HTTP
// (protobuf, JSON) and gRPC, a kill -9 between them, and the AEP stream
// checked at the relay. The package has no non-test code.
package crashtest
